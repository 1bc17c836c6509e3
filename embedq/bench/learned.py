"""`embedq bench threshold --learned` and `--train-learned`: the learned verifier against
the hand rules, on data neither was fitted to.

Fitting (semantic/learned.py `fit`) uses tests/data/semantic_pairs.domains.jsonl only, the
pairs whose cosine reaches the cache's threshold (below it a pair is a miss either way).
Leave-one-domain-out, for each domain D: the coefficients are fitted on the other
domains; the operating point is chosen on those domains alone, from out-of-fold
probabilities (each of them scored by a fit without it, an inner leave-one-domain-out):
the lowest probability above every near-miss's (`operating_point`: 0 served there); D is
then scored at it. The figures sum over the domains, per paraphrase style and near-miss
kind with 95% Wilson intervals, beside the rules' (lodo.py: D at the cosine threshold
the bench's rule picks on the other domains). The held-out and fresh splits are scored
last, by the fit on every domain at the operating point chosen from every domain's
out-of-fold probabilities, beside the rules at the default threshold: they choose
nothing.

`--train-learned` writes that last fit as the shipped weights (embedq/data/
learned_verifier.json) after printing the table its operating point was read from.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from embedq.bench.lodo import _pct, breakdown, domains_of, lodo_report
from embedq.bench.threshold import Embed, Pair, Scored, _mode, is_hit, score_pairs
from embedq.semantic.guard import words
from embedq.semantic.learned import FEATURES, WEIGHTS, Learned, features, fit
from embedq.semantic.verify import Verifier

Rows = npt.NDArray[np.float64]


def memo(embed: Embed) -> Embed:
    """`embed` behind an in-process dict: every text embedded once per command."""
    seen: dict[str, npt.NDArray[np.float32]] = {}

    def cached(texts: list[str]) -> Sequence[npt.NDArray[np.float32]]:
        new = sorted({t for t in texts if t not in seen})
        if new:
            seen.update(zip(new, embed(new), strict=True))
        return [seen[t] for t in texts]

    return cached


def feature_rows(scored: list[Scored], verifier: Verifier) -> Rows:
    every = sorted({w for s in scored for text in (s.pair.query, s.pair.stored)
                    for w in words(text)})
    verifier.embed(every)  # one call for the corpus' words; `features` reads the memo
    return np.stack([features(s.pair.query, s.pair.stored, s.score, verifier)
                     for s in scored]) if scored else np.zeros((0, 0))


def _labels(scored: list[Scored]) -> npt.NDArray[np.bool_]:
    return np.array([s.pair.label == "paraphrase" for s in scored], dtype=bool)


def _learned(rows: Rows, labels: npt.NDArray[np.bool_], threshold: float) -> Learned:
    mean, scale, weights, bias = fit(rows, labels)
    return Learned(FEATURES, tuple(map(float, mean)), tuple(map(float, scale)),
                   tuple(map(float, weights)), bias, threshold)


def out_of_fold(rows: Rows, labels: npt.NDArray[np.bool_], groups: list[str]) -> Rows:
    """Each row's probability under a fit on every other group's rows."""
    out = np.zeros(len(rows))
    names = np.array(groups)
    for group in sorted(set(groups)):
        inside = names == group
        model = _learned(rows[~inside], labels[~inside], 0.5)
        out[inside] = model.probabilities(rows[inside])
    return out


def operating_point(probabilities: Rows, labels: npt.NDArray[np.bool_]) -> float:
    """The lowest probability that serves no near-miss among `probabilities`: just above
    the highest near-miss's."""
    misses = probabilities[~labels]
    top = float(misses.max()) if len(misses) else 0.0
    # six decimals, as the weights file keeps it, rounded up so the top one stays out
    return min(1.0, math.floor(top * 1e6 + 1) / 1e6)


def sweep(probabilities: Rows, labels: npt.NDArray[np.bool_],
          chosen: float) -> list[dict[str, Any]]:
    """Paraphrases found and near-misses served at probability cut-offs around `chosen`."""
    cuts = sorted({0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, chosen})
    return [{"at": c, "found": int(np.sum(labels & (probabilities >= c))),
             "served": int(np.sum(~labels & (probabilities >= c))),
             "chosen": c == chosen} for c in cuts]


# The decisions compared: the learned verifier alone (the rules are among its features),
# and after the rules (the rules refuse first; the probability decides what they pass).
VARIANTS = ("learned", "rules_then_learned")


def _eligible(scored: list[Scored], floor: float, variant: str) -> npt.NDArray[np.bool_]:
    """The pairs a variant can serve, and so the ones its fit sees: a cosine at or above
    the threshold, and for rules_then_learned no refusal by the rules there."""
    return np.array([s.score >= floor and (variant == "learned" or is_hit(
        s, floor, *_mode("verifier_on"))) for s in scored], dtype=bool)


def fitted(rows: Rows, labels: npt.NDArray[np.bool_], groups: list[str]) -> Learned:
    """The fit on `rows`, at the operating point read from their out-of-fold
    probabilities (grouped by domain)."""
    point = operating_point(out_of_fold(rows, labels, groups), labels)
    return _learned(rows, labels, point)


def lodo_decisions(scored: list[Scored], rows: Rows, eligible: npt.NDArray[np.bool_],
                   ) -> tuple[list[tuple[Scored, bool]], list[dict[str, Any]]]:
    """Each domain's pairs decided by a fit, and an operating point, made without it."""
    labels = _labels(scored)
    groups = np.array([s.pair.domain for s in scored])
    decided: list[tuple[Scored, bool]] = []
    per_domain = []
    for domain in sorted(set(groups)):
        train = eligible & (groups != domain)
        model = fitted(rows[train], labels[train], list(groups[train]))
        inside = np.flatnonzero(groups == domain)
        p = model.probabilities(rows[inside])
        got = [(scored[i], bool(eligible[i] and p[k] >= model.threshold))
               for k, i in enumerate(inside)]
        decided += got
        row = breakdown(got)
        per_domain.append({"domain": domain, "operating_point": model.threshold,
                           "found": row["paraphrases_found"],
                           "served": row["near_misses_served"]})
    return decided, per_domain


def learned_report(pairs: list[Pair], heldout: dict[str, list[Pair]], embed: Embed,
                   default: float, known: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The learned verifier against the rules; `known`, the model's whole words, reaches
    the rules' column (as `--lodo` scores them), not the features the weights were fitted
    on."""
    domains = domains_of(pairs, "--learned", 3)
    embed = memo(embed)
    verifier = Verifier(embed)
    every = pairs + [p for split in heldout.values() for p in split]
    scored_all = score_pairs(every, embed, verifier)
    rows_all = feature_rows(scored_all, verifier)
    scored, rows = scored_all[:len(pairs)], rows_all[:len(pairs)]
    groups = [s.pair.domain for s in scored]
    report: dict[str, Any] = {"pairs": len(pairs), "domains": len(domains),
                              "default": default,
                              "rules": lodo_report(pairs, heldout, embed, default, known,
                                                   word_bars=False)}
    for variant in VARIANTS:
        eligible = _eligible(scored, default, variant)
        decided, per_domain = lodo_decisions(scored, rows, eligible)
        final = fitted(rows[eligible], _labels(scored)[eligible],
                       [g for g, e in zip(groups, eligible, strict=True) if e])
        splits, start = {}, len(pairs)
        for name, split in heldout.items():
            part = scored_all[start:start + len(split)]
            p = final.probabilities(rows_all[start:start + len(split)])
            ok = _eligible(part, default, variant)
            splits[name] = breakdown([(s, bool(ok[i] and p[i] >= final.threshold))
                                      for i, s in enumerate(part)])
            start += len(split)
        report[variant] = {"per_domain": per_domain, "lodo": breakdown(decided),
                           "heldout": splits}
        if variant == "learned":
            oof = out_of_fold(rows[eligible], _labels(scored)[eligible],
                              [g for g, e in zip(groups, eligible, strict=True) if e])
            report["weights"] = dict(final.to_json(), trained_on=(
                f"semantic_pairs.domains.jsonl: {int(eligible.sum())} pairs at cosine >= "
                f"{default}, {len(domains)} domains"))
            report["operating_table"] = sweep(oof, _labels(scored)[eligible],
                                              final.threshold)
    return report


def write_weights(report: dict[str, Any], model: str, path: Path = WEIGHTS) -> Path:
    """`report`'s fit on every domain as a weights file (JSON, `learned.load` reads it)."""
    data = dict(report["weights"], model=model)
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return path


def _columns(report: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(name, leave-one-domain-out figures, held-out figures per split) per decision."""
    rules = report["rules"]
    return [("rules", rules["lodo"], rules["heldout_at_default"]),
            *((v, report[v]["lodo"], report[v]["heldout"]) for v in VARIANTS)]


def print_learned(report: dict[str, Any], model: str) -> None:
    print(f"bench threshold --learned: {model}, {report['pairs']} pairs in "
          f"{report['domains']} domains. rules: each domain at the cosine threshold the "
          "bench's rule picks on the others; learned, rules_then_learned: fitted on the "
          f"others, served at cosine >= {report['default']:.2f} and a probability at or "
          "above the operating point read from the others' out-of-fold probabilities "
          "(0 near-misses served there); counts, %, 95% Wilson interval")
    columns = _columns(report)
    print(f"  {'':<20} " + " ".join(f"{name:<30}" for name, _, _ in columns))
    lines: list[tuple[str, str, str | None]] = [
        ("leave-one-domain-out", "", None),
        ("  paraphrases found", "paraphrases_found", None),
        ("  near-misses served", "near_misses_served", None)]
    lines += [(f"    {k}", "by_style", k) for k in report["rules"]["lodo"]["by_style"]]
    lines += [(f"    {k}", "by_kind", k) for k in report["rules"]["lodo"]["by_kind"]]
    for title, key, sub in lines:
        cells = ["" if not key else _pct(lodo[key] if sub is None else lodo[key][sub])
                 for _, lodo, _ in columns]
        print(f"{title:<22} " + " ".join(f"{c:<30}" for c in cells))
    for split in report["rules"]["heldout_at_default"]:
        print(f"{split} (never fitted on)")
        for key in ("paraphrases_found", "near_misses_served"):
            print(f"  {key.replace('_', ' '):<20} " + " ".join(
                f"{_pct(held[split][key]):<30}" for _, _, held in columns))
    print_operating(report)


def print_operating(report: dict[str, Any]) -> None:
    print("operating point of the shipped fit, from every domain's out-of-fold "
          "probabilities (pairs at or above the threshold):")
    print("  probability  paraphrases found  near-misses served")
    for row in report["operating_table"]:
        mark = "  <- chosen: the lowest with 0 served" if row["chosen"] else ""
        print(f"  {row['at']:>11.6f}  {row['found']:>17}  {row['served']:>18}{mark}")


