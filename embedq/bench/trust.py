"""Finding more under an error budget: a namespace's trust score (part of `embedq bench
threshold --lodo`).

By default a candidate the verifier refuses is never served, whatever its score: the
cache keeps 0 false hits and finds fewer paraphrases (most of those it refuses are
rewordings whose replaced words the model reads as different ones, the content slot).
A namespace with an error budget may set a trust score (feedback.py): a candidate at or
above it that the verifier refuses only on a slot the model judges (content, disjoint)
is served, and wrong verdicts on those hits raise the score by the budget's rule
(budget.py). Two tables say what that buys and costs, on the labelled pairs:

  per score   at the default threshold, for each score of SCORES: paraphrases found and
              near-misses served on the domains' file, the share of served hits that are
              wrong, and the other splits' found / served;
  feedback    the namespace in operation: every paraphrase of the domains' file and a
              share of its near-misses (all, or a seeded tenth: traffic where a lookup
              one detail away from a stored query is rarer) looked up once, in a seeded
              random order, each served hit judged truthfully, the trust score derived
              again after each verdict (budget.budget_threshold, as the cache does), from
              each base of BASES, for each budget of BUDGETS: what it found and served
              along the way and the score it ends at; then the other splits, which the
              loop never saw, at the median end score.

Nothing here is chosen from these pairs: the scores are a grid, the base and budgets
the operator's. The near-misses are written to be hard (one detail changed), so the
wrong share among served hits is higher than traffic of mostly unrelated queries shows.
"""

from __future__ import annotations

import random
from typing import Any

from embedq.bench.threshold import Scored, is_hit
from embedq.semantic.budget import Verdict, budget_threshold
from embedq.semantic.verify import DEFAULT_BAND, MODEL_SLOTS

SCORES = (0.85, 0.88, 0.9, 0.92, 0.95, 0.97)
BUDGETS = (0.01, 0.02, 0.05)
BASES = (0.85, 0.9)
SHARES = (1.0, 0.1)  # of the near-misses looked up in the feedback loop
SEEDS = (1, 2, 3)


def served(s: Scored, threshold: float, trust: float | None) -> tuple[bool, bool]:
    """(served, served over a model-judged conflict) for a lookup of `s`'s query in a
    namespace holding its stored query alone: SemanticCache.lookup under a trust score."""
    if is_hit(s, threshold, True, DEFAULT_BAND):
        return True, False
    over = (trust is not None and s.score >= max(threshold, trust) and not s.contrasting
            and s.conflict is not None and s.conflict.slot in MODEL_SLOTS)
    return over, over


def _counts(scored: list[Scored], threshold: float, trust: float | None) -> dict[str, int]:
    hits = [s for s in scored if served(s, threshold, trust)[0]]
    found = sum(s.pair.label == "paraphrase" for s in hits)
    return {"found": found, "served": len(hits) - found,
            "paraphrases": sum(s.pair.label == "paraphrase" for s in scored),
            "near_misses": sum(s.pair.label != "paraphrase" for s in scored)}


def feedback_loop(scored: list[Scored], threshold: float, base: float, budget: float,
                  seed: int, share: float = 1.0) -> dict[str, Any]:
    """Every paraphrase and `share` of the near-misses (drawn with `seed`) looked up once
    in a seeded order, each hit judged truthfully, the threshold and the trust score
    derived again after each verdict (see the module)."""
    rng = random.Random(seed)
    near = [s for s in scored if s.pair.label != "paraphrase"]
    kept = {id(s) for s in rng.sample(near, round(len(near) * share))}
    order = [s for s in scored if s.pair.label == "paraphrase" or id(s) in kept]
    rng.shuffle(order)
    verified: list[Verdict] = []
    trusted: list[Verdict] = []
    at, trust = threshold, base
    found = wrong = over = 0
    for s in order:
        hit, via_trust = served(s, at, trust)
        if not hit:
            continue
        correct = s.pair.label == "paraphrase"
        found, wrong, over = found + correct, wrong + (not correct), over + via_trust
        if via_trust:
            trusted.append(Verdict(s.score, trust, correct))
            trust = budget_threshold(trusted, base, budget)
        else:
            verified.append(Verdict(s.score, at, correct))
            at = budget_threshold(verified, threshold, budget)
    return {"found": found, "served": wrong, "over_trust": over, "trust": trust,
            "threshold": at}


def trust_report(pairs: int, scored: list[Scored], rest: dict[str, list[Scored]],
                 threshold: float) -> dict[str, Any]:
    """The report: `scored` the domains' file's pairs (the first `pairs`), `rest` the
    other splits' scored pairs, by name."""
    domains = scored[:pairs]
    per_score = {str(t): {"domains": _counts(domains, threshold, t), "splits": {
        name: _counts(part, threshold, t) for name, part in rest.items()}}
        for t in (None, *SCORES)}
    loops = []
    for share in SHARES:
        for base in BASES:
            runs = {budget: [feedback_loop(domains, threshold, base, budget, seed, share)
                             for seed in SEEDS] for budget in BUDGETS}
            for budget, row in runs.items():
                ends = sorted(r["trust"] for r in row)
                loops.append({"share": share, "base": base, "budget": budget, "runs": row,
                              "same_as_first_budget": row == runs[BUDGETS[0]],
                              "splits": {name: _counts(part, threshold, ends[len(ends) // 2])
                                         for name, part in rest.items()}})
    return {"threshold": threshold, "per_score": per_score, "seeds": list(SEEDS),
            "loops": loops}


def _share(row: dict[str, Any]) -> str:
    hits = row["found"] + row["served"]
    return f"{100 * row['served'] / hits:4.1f}%" if hits else "   -"


def print_trust(report: dict[str, Any]) -> None:
    print(f"under an error budget, a trust score: a candidate the verifier refuses only on a "
          f"model-judged slot is served from that score (threshold {report['threshold']:.2f}"
          "); domains' file: found, near-misses served, wrong share of served hits; other "
          "splits found / served")
    names = list(next(iter(report["per_score"].values()))["splits"])
    print("  trust  found              served       wrong   " + ", ".join(names))
    for score, row in report["per_score"].items():
        d = row["domains"]
        cells = "  ".join(f"{r['found']:>3}/{r['served']}" for r in row["splits"].values())
        label = "none" if score == "None" else score
        print(f"  {label:<5}  {d['found']:>4}/{d['paraphrases']:<4} "
              f"{100 * d['found'] / d['paraphrases']:5.1f}%  {d['served']:>4}/"
              f"{d['near_misses']:<5}  {_share(d)}   {cells}")
    print(f"  feedback in operation: every paraphrase of the domains' file and all or a "
          f"tenth of its near-misses looked up once in a random order (seeds "
          f"{report['seeds']}), each hit judged: found, near-misses served, over the trust "
          "score, the score it ends at; other splits at the median end score")
    for row in report["loops"]:
        head = (f"  near-misses x{row['share']:<4} from {row['base']:<5} budget "
                f"{row['budget']:<5}")
        if row["same_as_first_budget"] and row["budget"] != BUDGETS[0]:
            print(f"{head} the same as budget {BUDGETS[0]}")
            continue
        runs = "; ".join(f"{r['found']}, {r['served']}, {r['over_trust']}, {r['trust']:.4f}"
                         for r in row["runs"])
        cells = "  ".join(f"{r['found']:>3}/{r['served']}" for r in row["splits"].values())
        print(f"{head} {runs}   {cells}")
