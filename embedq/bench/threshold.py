"""`embedq bench threshold`: the table the semantic cache's default threshold is chosen from.

Labelled pairs (JSONL lines `{"stored", "query", "label"}`, label `paraphrase`: the query
must find the stored entry, or `near_miss`: it must not) come in two splits that share no
text (tests/data):
  semantic_pairs.tune.jsonl     the threshold and the contrast guard were tuned on these;
  semantic_pairs.heldout.jsonl  written without looking at scores, never tuned on: only
                                reported (and checked by tests/integration/
                                test_semantic_precision.py).
Each pair is one stored entry and one lookup, decided as `SemanticCache.lookup` decides
(`is_hit`): the cosine of the two unit vectors at or above the threshold and, with the
guard on, `guard.contrasting(asked, stored)` false. The texts are embedded once, with the
configured model (embedded: the default all-MiniLM-L6-v2, no servers), through the same
`Client.embed` the cache's queries go through.

The rule, printed with the table: the chosen threshold is the lowest on the grid at which
the tune split has no false hit with the guard on, plus MARGIN_STEPS grid steps, so a
near-miss scoring slightly above every tuned one still misses.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from embedq.cache.semantic.guard import contrasting
from embedq.cache.semantic.index import unit_rows
from embedq.config import Settings
from embedq.errors import BadInputFile, InvalidInput

PAIRS_DIR = Path(__file__).resolve().parents[2] / "tests" / "data"
TUNE = PAIRS_DIR / "semantic_pairs.tune.jsonl"
HELDOUT = PAIRS_DIR / "semantic_pairs.heldout.jsonl"
LABELS = ("paraphrase", "near_miss")
STEP = 0.01
GRID = tuple(round(0.60 + STEP * i, 2) for i in range(36))  # 0.60 .. 0.95
MARGIN_STEPS = 2
RULE = (f"lowest threshold with 0 false hits on the tune split, guard on, "
        f"+ {MARGIN_STEPS} steps of {STEP}")

Embed = Callable[[list[str]], Sequence[npt.NDArray[np.float32]]]


@dataclass(frozen=True)
class Pair:
    stored: str
    query: str
    label: str


@dataclass(frozen=True)
class Scored:
    pair: Pair
    score: float  # cosine of the unit vectors, as the index scores it
    contrasting: bool  # the guard's verdict on (asked=query, stored)


def load_pairs(path: Path) -> list[Pair]:
    if not path.is_file():
        raise InvalidInput(
            f"no labelled pairs at {path}: pass --pairs-file and --heldout-file (JSONL "
            "lines {\"stored\", \"query\", \"label\"}; the repository's tests/data has them)",
            "pairs_file",
        )
    pairs = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            pair = Pair(str(row["stored"]), str(row["query"]), str(row["label"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise BadInputFile(f"{path}: not a pair ({exc}): write "
                               "{\"stored\": ..., \"query\": ..., \"label\": ...}", n) from exc
        if pair.label not in LABELS:
            raise BadInputFile(f"{path}: label {pair.label!r}: use one of {LABELS}", n)
        pairs.append(pair)
    return pairs


def score_pairs(pairs: list[Pair], embed: Embed) -> list[Scored]:
    """Embed every distinct text once (one call) and score each pair."""
    texts = sorted({t for p in pairs for t in (p.stored, p.query)})
    rows = unit_rows(np.stack(list(embed(texts))).astype(np.float32))
    at = {t: rows[i] for i, t in enumerate(texts)}
    return [Scored(p, float(at[p.query] @ at[p.stored]), contrasting(p.query, p.stored))
            for p in pairs]


def is_hit(scored: Scored, threshold: float, guard: bool) -> bool:
    """A lookup of `query` in a namespace holding only `stored`: SemanticCache.lookup's test."""
    return scored.score >= threshold and not (guard and scored.contrasting)


def figures(scored: list[Scored], threshold: float, guard: bool) -> dict[str, Any]:
    hits = [s for s in scored if is_hit(s, threshold, guard)]
    true_hits = sum(s.pair.label == "paraphrase" for s in hits)
    paraphrases = sum(s.pair.label == "paraphrase" for s in scored)
    return {
        "threshold": threshold,
        "guard": guard,
        "true_hits": true_hits,
        "false_hits": len(hits) - true_hits,
        "paraphrases": paraphrases,
        "near_misses": len(scored) - paraphrases,
        "precision": round(true_hits / len(hits), 4) if hits else None,
        "recall": round(true_hits / paraphrases, 4) if paraphrases else None,
    }


def choose(tune: list[Scored]) -> float:
    safe = [t for t in GRID if figures(tune, t, guard=True)["false_hits"] == 0]
    if not safe:
        raise InvalidInput(f"no threshold up to {GRID[-1]} has 0 false hits on the tune "
                           "split: check the near-miss labels", "pairs_file")
    return min(GRID[-1], round(safe[0] + MARGIN_STEPS * STEP, 2))


def threshold_report(tune_pairs: list[Pair], heldout_pairs: list[Pair], embed: Embed,
                     default: float) -> dict[str, Any]:
    tune = score_pairs(tune_pairs, embed)
    heldout = score_pairs(heldout_pairs, embed)
    chosen = choose(tune)
    passing = [s for s in tune if s.pair.label == "near_miss" and not s.contrasting]
    top = max(passing, key=lambda s: s.score, default=None)
    return {
        "rule": RULE,
        "tune_pairs": len(tune),
        "heldout_pairs": len(heldout),
        "table": [{"guard_off": figures(tune, t, guard=False),
                   "guard_on": figures(tune, t, guard=True)} for t in GRID],
        "top_near_miss_past_guard": None if top is None else {
            "score": round(top.score, 4), "stored": top.pair.stored, "query": top.pair.query},
        "chosen": chosen,
        "default": default,
        "heldout_at_chosen": figures(heldout, chosen, guard=True),
        "heldout_at_default": figures(heldout, default, guard=True),
        "heldout_false_hits_at_default": [
            {"score": round(s.score, 4), "stored": s.pair.stored, "query": s.pair.query}
            for s in heldout if is_hit(s, default, True) and s.pair.label == "near_miss"],
    }


def _cell(row: dict[str, Any]) -> str:
    precision = "-" if row["precision"] is None else f"{row['precision']:.3f}"
    return (f"{row['true_hits']:>3}/{row['paraphrases']:<3} {row['false_hits']:>3}  "
            f"{precision:>5}  {row['recall']:.3f}")


def _heldout_line(name: str, row: dict[str, Any]) -> str:
    return (f"held-out at {name} {row['threshold']:.2f} (guard on): "
            f"{row['true_hits']}/{row['paraphrases']} paraphrases found "
            f"(recall {row['recall']:.3f}), {row['false_hits']} false hits "
            f"in {row['near_misses']} near-misses")


def print_report(report: dict[str, Any], model: str) -> None:
    print(f"bench threshold: {model}, tune split {report['tune_pairs']} pairs, "
          f"held-out split {report['heldout_pairs']} pairs")
    print("           guard off                    | guard on")
    print("threshold  true   false  prec.  recall  | true   false  prec.  recall")
    for row in report["table"]:
        off, on = row["guard_off"], row["guard_on"]
        mark = " <- chosen" if on["threshold"] == report["chosen"] else ""
        print(f"  {on['threshold']:.2f}     {_cell(off)}  | {_cell(on)}{mark}")
    top = report["top_near_miss_past_guard"]
    if top is not None:
        print(f"highest tune near-miss the guard lets through: {top['score']:.4f} "
              f"({top['stored']!r} / {top['query']!r})")
    print(f"rule: {report['rule']} -> {report['chosen']:.2f}")
    print(_heldout_line("chosen", report["heldout_at_chosen"]))
    if report["default"] != report["chosen"]:
        print(_heldout_line("the default", report["heldout_at_default"]))
    for miss in report["heldout_false_hits_at_default"]:
        print(f"  held-out false hit: {miss['score']:.4f} {miss['stored']!r} / "
              f"{miss['query']!r}")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from embedq.client import Client

    tune = load_pairs(Path(args.pairs_file) if args.pairs_file else TUNE)
    heldout = load_pairs(Path(args.heldout_file) if args.heldout_file else HELDOUT)
    settings = Settings.from_env()
    with tempfile.TemporaryDirectory(prefix="embedq-bench-") as tmp:
        if settings.embedded:
            settings = settings.with_overrides(data_dir=Path(tmp))
        with Client(settings) as client:
            report = threshold_report(tune, heldout, client.embed,
                                      default=settings.semantic_threshold)
    report["model"] = settings.model
    if not args.json:
        print_report(report, settings.model)
    return report
