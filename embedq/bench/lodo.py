"""`embedq bench threshold --lodo [FILE]`: leave-one-domain-out figures of today's rules.

FILE (default tests/data/semantic_pairs.domains.jsonl) names each pair's domain. For each
domain D, the threshold is chosen by the bench's rule (`threshold.choose`: the lowest grid
threshold with no false hit, verifier on, plus MARGIN_STEPS) on every other domain, then D
is scored at it; where no grid threshold is free of false hits on the other domains, D is
scored at the top of the grid and the report says so. The guard and the verifier are the
fixed hand rules (fitted to the tune split, none of these domains). Summed over domains:
paraphrases found and near-misses served, per paraphrase style and per near-miss kind,
each with a 95% Wilson interval; then the same at the configured default threshold on the
whole file, and the other splits (held-out, fresh, blind) at the default and at the
threshold the rule picks on every domain, for comparison; last, the content slot's word
bar chosen with the threshold the same way (word_bar.py); last, what a namespace's trust
score under an error budget finds and serves (trust.py). Every text is embedded once, in
one call (`threshold.score_pairs`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from embedq.bench.crowded import crowded
from embedq.bench.threshold import (
    GRID,
    MARGIN_STEPS,
    STEP,
    Embed,
    Pair,
    Scored,
    _mode,
    figures,
    is_hit,
    score_pairs,
)
from embedq.bench.trust import print_trust, trust_report
from embedq.bench.word_bar import print_word_bar, word_bar_report
from embedq.errors import InvalidInput
from embedq.semantic.verify import Verifier

Z95 = 1.959964


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of k successes in n trials (95% at the default z)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(k: int, n: int) -> dict[str, Any]:
    low, high = wilson(k, n)
    return {"k": k, "n": n, "rate": round(k / n, 4) if n else None,
            "low": round(low, 4), "high": round(high, 4)}


def choose_on(scored: list[Scored]) -> tuple[float, bool]:
    """The bench's rule on `scored`, and whether a grid threshold was free of false hits
    (if none is, the top of the grid)."""
    band = _mode("verifier_on")
    safe = [t for t in GRID if figures(scored, t, *band)["false_hits"] == 0]
    if not safe:
        return GRID[-1], False
    return min(GRID[-1], round(safe[0] + MARGIN_STEPS * STEP, 2)), True


_STYLE_KEYS = frozenset(("spelling_variant", "typo", "abbreviation", "vocabulary",
                         "reorder", "synonym", "question_form", "paraphrase"))


def breakdown(decided: Iterable[tuple[Scored, bool]]) -> dict[str, Any]:
    """Paraphrases found and near-misses served, in all and per style or kind (a
    paraphrase of no named style counts under "paraphrase")."""
    totals = {"paraphrase": [0, 0], "near_miss": [0, 0]}
    counts: dict[str, list[int]] = {}
    for s, hit in decided:
        key = (s.pair.style or "paraphrase") if s.pair.label == "paraphrase" else s.pair.kind
        for row in (totals[s.pair.label], counts.setdefault(key, [0, 0])):
            row[0] += hit
            row[1] += 1
    return {"paraphrases_found": rate(*totals["paraphrase"]),
            "near_misses_served": rate(*totals["near_miss"]),
            "by_style": {k: rate(*v) for k, v in sorted(counts.items()) if k in _STYLE_KEYS},
            "by_kind": {k: rate(*v) for k, v in sorted(counts.items())
                        if k not in _STYLE_KEYS}}


def _at(scored: list[Scored], threshold: float) -> list[tuple[Scored, bool]]:
    return [(s, is_hit(s, threshold, *_mode("verifier_on"))) for s in scored]


def domains_of(pairs: list[Pair], option: str, least: int) -> list[str]:
    """The pairs' domains, sorted; InvalidInput unless every pair names one and there are
    at least `least` (a domain is scored by what was chosen on the others)."""
    domains = sorted({p.domain for p in pairs})
    if len(domains) < least or "" in domains:
        raise InvalidInput(f"{option} needs pairs that each name a \"domain\", in {least} "
                           "domains or more (tests/data/semantic_pairs.domains.jsonl has "
                           "them)", "lodo")
    return domains


def lodo_report(pairs: list[Pair], heldout: dict[str, list[Pair]], embed: Embed,
                default: float, known: frozenset[str] = frozenset(),
                word_bars: bool = True) -> dict[str, Any]:
    """The report; `known`: the model's whole words, as the cache's verifier holds them
    (encoders.tokens.known_words); `word_bars`: with the word bar's section (word_bar.py,
    four more verifications of every pair; `--learned` reports the rules without it)."""
    domains = domains_of(pairs, "--lodo", 2)
    every = pairs + [p for split in heldout.values() for p in split]
    # One embed call for every text.
    verifier = Verifier(embed, known=known)
    scored_all = score_pairs(every, embed, verifier)
    scored, rest = scored_all[:len(pairs)], scored_all[len(pairs):]
    per_domain, decided = [], []
    for domain in domains:
        inside = [s for s in scored if s.pair.domain == domain]
        threshold, safe = choose_on([s for s in scored if s.pair.domain != domain])
        got = _at(inside, threshold)
        decided += got
        row = breakdown(got)
        per_domain.append({"domain": domain, "threshold": threshold, "safe": safe,
                           "found": row["paraphrases_found"],
                           "served": row["near_misses_served"]})
    chosen, _ = choose_on(scored)  # the bench's rule on every domain
    splits, at_chosen, parts, start = {}, {}, {}, 0
    for name, split in heldout.items():
        part = parts[name] = rest[start:start + len(split)]
        start += len(split)
        splits[name] = breakdown(_at(part, default))
        at_chosen[name] = breakdown(_at(part, chosen))
    both = (default, chosen) if default != chosen else (default,)
    one_namespace = {"domains": crowded(pairs, embed, verifier, both)} | {
        name: crowded(split, embed, verifier, both) for name, split in heldout.items()}
    return {"pairs": len(pairs), "domains": len(domains), "per_domain": per_domain,
            "lodo": breakdown(decided), "default": default,
            "word_bar": word_bar_report(pairs, heldout, embed, default, known)
            if word_bars else None,
            "at_default": breakdown(_at(scored, default)), "heldout_at_default": splits,
            "chosen": chosen, "heldout_at_chosen": at_chosen,
            "one_namespace": one_namespace,
            "trust": trust_report(len(pairs), scored, parts, default)}


def _pct(row: dict[str, Any]) -> str:
    if not row["n"]:
        return "-"
    return (f"{row['k']:>4}/{row['n']:<4} {100 * row['rate']:5.1f}% "
            f"[{100 * row['low']:5.1f}, {100 * row['high']:5.1f}]")


def _section(title: str, row: dict[str, Any]) -> None:
    print(f"{title}: paraphrases found {_pct(row['paraphrases_found'])}; "
          f"near-misses served {_pct(row['near_misses_served'])}")


def print_lodo(report: dict[str, Any], model: str) -> None:
    print(f"bench threshold --lodo: {model}, {report['pairs']} pairs in "
          f"{report['domains']} domains; each domain scored at the threshold the rule "
          "picks on the others (verifier on); counts, %, 95% Wilson interval")
    print("  domain               thr.  paraphrases found             near-misses served")
    for row in report["per_domain"]:
        mark = "" if row["safe"] else " (no threshold free of false hits on the others)"
        print(f"  {row['domain']:<20} {row['threshold']:.2f}  {_pct(row['found'])}  "
              f"{_pct(row['served'])}{mark}")
    lodo = report["lodo"]
    _section("leave-one-domain-out", lodo)
    both = report["at_default"]
    print(f"{'kind or style':<18} {'leave-one-domain-out':<32} "
          f"at the default {report['default']:.2f}")
    for group in ("by_style", "by_kind"):
        for key, row in lodo[group].items():
            print(f"  {key:<16} {_pct(row):<32} {_pct(both[group][key])}")
    _section(f"whole file at the default {report['default']:.2f}", both)
    for name, row in report["heldout_at_default"].items():
        _section(f"{name} at the default {report['default']:.2f}", row)
        if report["chosen"] != report["default"]:
            _section(f"{name} at {report['chosen']:.2f} (the rule on every domain)",
                     report["heldout_at_chosen"][name])
    print("one namespace per domain (the domains' file; one per other file), every query "
          "looked up: true hits, near-misses served, hits on another entry (false hits)")
    for name, rows in report["one_namespace"].items():
        for threshold, row in rows.items():
            print(f"  {name:<24} {threshold}  {row['queries']:>5} queries  "
                  f"true {row['true_hits']:>4}  near-misses {row['near_misses_served']:>2}  "
                  f"other entries {row['other_entry_hits']:>2}  misses {row['misses']:>4}")
    if report["word_bar"] is not None:
        print_word_bar(report["word_bar"], report["default"])
    print_trust(report["trust"])
