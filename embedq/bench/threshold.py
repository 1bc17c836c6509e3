"""`embedq bench threshold`: the table the semantic cache's default threshold is chosen from.

Labelled pairs (JSONL `{"stored", "query", "label", "kind"}`, label `paraphrase`: the
query must find the stored entry, or `near_miss`: it must not; kind `paraphrase` or the
near-miss's edit, one of KINDS) come in splits that share no text (tests/data):
  semantic_pairs.tune.jsonl     the threshold, the guard and the verifier were tuned on these;
  semantic_pairs.heldout.jsonl  never tuned on: only reported (and checked by
                                tests/integration/test_semantic_precision.py).
  semantic_pairs.fresh.jsonl    a second held-out split, written after the first one's
                                report had been read (before any rule it suggested).
  semantic_pairs.domains.jsonl  1,200 pairs in 21 domains none of the others covers, each
                                naming its `domain` and a paraphrase its `style` (STYLES);
                                `--lodo` scores it leave-one-domain-out (lodo.py).
  semantic_pairs.blind.jsonl    120 pairs in 6 more domains, written after the rules it
  semantic_pairs.blind2.jsonl   was first scored on were fixed; blind2, 6 more, likewise a
                                round later; `--lodo` reports them with the others.
Each pair is one stored entry and one lookup, decided as `SemanticCache.lookup` decides
(`is_hit`): the cosine of the two unit vectors at or above the threshold; with the guard
on, `guard.contrasting(asked, stored)` false; with the verifier on, no lexical slot
conflict and, in the band, no content conflict (verify.py). The texts (and the verifier's
spans) are embedded once with the configured model (embedded: all-MiniLM-L6-v2), through
the `Client.embed` the cache's queries go through.

`--lodo [FILE]` prints lodo.py's leave-one-domain-out report instead of what follows,
`--learned [FILE]` learned.py's learned verifier against the rules (`--train-learned` saves it).

Printed: the tune table in three modes (guard off, guard on, verifier on) and the rule's
pick, the tune split by kind at that pick, the held-out figures at the default per mode and
per kind, its false hits and refused paraphrases, the verifier's cost per verified
candidate (p50/p99 ms, spans cached), and a whole lookup's, verifier on and off.

The rule, printed with the table: the chosen threshold is the lowest on the grid at which
the tune split has no false hit with the verifier on, plus MARGIN_STEPS grid steps, so a
near-miss scoring slightly above every tuned one still misses.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from embedq.bench.lookup_cost import lookup_cost, verify_cost
from embedq.config import Settings
from embedq.encoders.tokens import known_words
from embedq.errors import BadInputFile, InvalidInput
from embedq.semantic import synonyms
from embedq.semantic.guard import contrasting
from embedq.semantic.index import unit_rows
from embedq.semantic.meant import meant
from embedq.semantic.verify import DEFAULT_BAND, MODEL_SLOTS, Conflict, Verifier

PAIRS_DIR = Path(__file__).resolve().parents[2] / "tests" / "data"
TUNE = PAIRS_DIR / "semantic_pairs.tune.jsonl"
HELDOUT = PAIRS_DIR / "semantic_pairs.heldout.jsonl"
FRESH = PAIRS_DIR / "semantic_pairs.fresh.jsonl"
BLIND = PAIRS_DIR / "semantic_pairs.blind.jsonl"
BLIND2 = PAIRS_DIR / "semantic_pairs.blind2.jsonl"
DOMAINS = PAIRS_DIR / "semantic_pairs.domains.jsonl"
LABELS = ("paraphrase", "near_miss")
# A near-miss's kind names its edit; a paraphrase's kind is "paraphrase".
# swap: roles swapped (a pronoun or a word changes whose it is); scope: narrower or wider
# (one item / all of them, mine / the team's); tense: when it happened changes the answer;
# qualifier: an added condition-like modifier; attribute: another property of the same
# thing; quantity: all / some / both / several; amount: a sum of money or a dose; unit:
# the same figure in another unit or period; date: another day or month; conditional: an
# "if" clause that changes the answer.
KINDS = ("paraphrase", "one_word", "negation", "swap", "number", "entity", "time",
         "multi_word", "scope", "tense", "qualifier", "attribute", "quantity", "antonym",
         "date", "unit", "amount", "conditional")
# A paraphrase's style, where a file names it (semantic_pairs.domains.jsonl does).
STYLES = ("spelling_variant", "typo", "abbreviation", "vocabulary", "reorder", "synonym",
          "question_form")
MODES = ("guard_off", "guard_on", "verifier_on")
STEP = 0.01
GRID = tuple(round(0.60 + STEP * i, 2) for i in range(36))  # 0.60 .. 0.95
MARGIN_STEPS = 2
RULE = (f"lowest threshold with 0 false hits on the tune split, verifier on, "
        f"+ {MARGIN_STEPS} steps of {STEP}")

Embed = Callable[[list[str]], Sequence[npt.NDArray[np.float32]]]

if TYPE_CHECKING:
    from embedq.client import Client


@dataclass(frozen=True)
class Pair:
    stored: str
    query: str
    label: str
    kind: str
    domain: str = ""  # where the file names one
    style: str = ""  # a paraphrase's, where the file names one


@dataclass(frozen=True)
class Scored:
    pair: Pair
    score: float  # cosine of the unit vectors, as the index scores it
    contrasting: bool  # the guard's verdict on (asked=query, stored)
    conflict: Conflict | None = None  # the verifier's verdict, were the score in its band


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
            pair = Pair(str(row["stored"]), str(row["query"]), str(row["label"]),
                        str(row["kind"]), str(row.get("domain", "")),
                        str(row.get("style", "")))
        except (ValueError, KeyError, TypeError) as exc:
            raise BadInputFile(f"{path}: not a pair ({exc}): write {{\"stored\": ..., "
                               "\"query\": ..., \"label\": ..., \"kind\": ...}}", n) from exc
        if pair.label not in LABELS:
            raise BadInputFile(f"{path}: label {pair.label!r}: use one of {LABELS}", n)
        if pair.kind not in KINDS or (pair.kind == "paraphrase") != (
                pair.label == "paraphrase"):
            raise BadInputFile(f"{path}: kind {pair.kind!r}: a paraphrase's kind is "
                               f"'paraphrase', a near-miss's one of {KINDS[1:]}", n)
        if pair.style and (pair.style not in STYLES or pair.label != "paraphrase"):
            raise BadInputFile(f"{path}: style {pair.style!r}: only a paraphrase has one, "
                               f"one of {STYLES}", n)
        pairs.append(pair)
    return pairs


def score_pairs(pairs: list[Pair], embed: Embed,
                verifier: Verifier | None = None) -> list[Scored]:
    """Embed every distinct text once (one call) and score each pair; with the verifier,
    as a lookup scores it, the better of the query as asked and as meant (meant.py)."""
    known = frozenset() if verifier is None else verifier.known
    texts = sorted({t for p in pairs for t in (p.stored, p.query)})
    rows = unit_rows(np.stack(list(embed(texts))).astype(np.float32))
    at = {t: rows[i] for i, t in enumerate(texts)}
    out = []
    for p in pairs:
        conflict = None if verifier is None else verifier.conflict(p.query, p.stored)
        score = as_meant(p.query, p.stored, float(at[p.query] @ at[p.stored]), at, embed,
                         known)
        out.append(Scored(p, score, contrasting(p.query, p.stored, known), conflict))
    return out


def as_meant(query: str, stored: str, score: float, at: dict[str, Any], embed: Embed,
             known: frozenset[str]) -> float:
    """The better of `score` and the score of `query` as meant toward `stored`, as a lookup
    scores a candidate (lookup.mend); `at` holds the unit rows of the texts embedded so far,
    and gets the rewritten query's."""
    text = meant(query, stored, known)
    if text is None:
        return score
    if text not in at:
        at[text] = unit_rows(np.stack(list(embed([text]))).astype(np.float32))[0]
    return max(score, float(at[text] @ at[stored]))


def is_hit(scored: Scored, threshold: float, guard: bool,
           verify_band: float | None = None) -> bool:
    """A lookup of `query` in a namespace holding only `stored`: SemanticCache.lookup's test."""
    if scored.score < threshold or (guard and scored.contrasting):
        return False
    conflict = scored.conflict
    return verify_band is None or conflict is None or (
        conflict.slot in MODEL_SLOTS and scored.score >= threshold + verify_band)


def _mode(mode: str) -> tuple[bool, float | None]:
    return mode != "guard_off", DEFAULT_BAND if mode == "verifier_on" else None


def figures(scored: list[Scored], threshold: float, guard: bool,
            verify_band: float | None = None) -> dict[str, Any]:
    hits = [s for s in scored if is_hit(s, threshold, guard, verify_band)]
    true_hits = sum(s.pair.label == "paraphrase" for s in hits)
    paraphrases = sum(s.pair.label == "paraphrase" for s in scored)
    return {
        "threshold": threshold,
        "guard": guard,
        "verify_band": verify_band,
        "true_hits": true_hits,
        "false_hits": len(hits) - true_hits,
        "paraphrases": paraphrases,
        "near_misses": len(scored) - paraphrases,
        "precision": round(true_hits / len(hits), 4) if hits else None,
        "recall": round(true_hits / paraphrases, 4) if paraphrases else None,
    }


def by_kind(scored: list[Scored], threshold: float) -> dict[str, dict[str, Any]]:
    """Per kind, per mode: paraphrases found (recall) or near-misses let through."""
    out: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        group = [s for s in scored if s.pair.kind == kind]
        if group:
            out[kind] = {"pairs": len(group), **{
                mode: sum(is_hit(s, threshold, *_mode(mode)) for s in group)
                for mode in MODES}}
    return out


def choose(tune: list[Scored]) -> float:
    safe = [t for t in GRID
            if figures(tune, t, *_mode("verifier_on"))["false_hits"] == 0]
    if not safe:
        raise InvalidInput(f"no threshold up to {GRID[-1]} has 0 false hits on the tune "
                           "split: check the near-miss labels", "pairs_file")
    return min(GRID[-1], round(safe[0] + MARGIN_STEPS * STEP, 2))


def threshold_report(tune_pairs: list[Pair], heldout_pairs: list[Pair], embed: Embed,
                     default: float, known: frozenset[str] = frozenset()) -> dict[str, Any]:
    verifier = Verifier(embed, known=known)
    tune = score_pairs(tune_pairs, embed, verifier)
    heldout = score_pairs(heldout_pairs, embed, verifier)
    chosen = choose(tune)
    return {
        "verify_ms": verify_cost(heldout_pairs, verifier),
        "rule": RULE,
        "tune_pairs": len(tune),
        "heldout_pairs": len(heldout),
        "table": [{mode: figures(tune, t, *_mode(mode)) for mode in MODES} for t in GRID],
        "chosen": chosen,
        "default": default,
        "heldout": {mode: figures(heldout, default, *_mode(mode)) for mode in MODES},
        "heldout_at_chosen": figures(heldout, chosen, *_mode("verifier_on")),
        "heldout_by_kind": by_kind(heldout, default),
        "tune_by_kind": by_kind(tune, chosen),
        "heldout_false_hits_at_default": [
            {"score": round(s.score, 4), "stored": s.pair.stored, "query": s.pair.query}
            for s in heldout
            if is_hit(s, default, *_mode("verifier_on")) and s.pair.label == "near_miss"],
        "heldout_refused_paraphrases_at_default": [
            {"score": round(s.score, 4), "stored": s.pair.stored, "query": s.pair.query,
             "conflict": str(s.conflict)}
            for s in heldout if s.pair.label == "paraphrase" and s.score >= default
            and not is_hit(s, default, *_mode("verifier_on"))],
    }


def _cell(row: dict[str, Any]) -> str:
    precision = "-" if row["precision"] is None else f"{row['precision']:.3f}"
    return (f"{row['true_hits']:>3}/{row['paraphrases']:<3} {row['false_hits']:>3}  "
            f"{precision:>5}  {row['recall']:.3f}")


def _heldout_line(name: str, row: dict[str, Any]) -> str:
    return (f"held-out at {row['threshold']:.2f}, {name}: "
            f"{row['true_hits']}/{row['paraphrases']} paraphrases found "
            f"(recall {row['recall']:.3f}), {row['false_hits']} false hits "
            f"in {row['near_misses']} near-misses")


def _kind_rows(rows: dict[str, dict[str, Any]]) -> None:
    for kind, row in rows.items():
        print(f"  {kind:<11} {row['pairs']:>4}  " + "  ".join(
            f"{row[m]:>{len(m)}}" for m in MODES))


def print_report(report: dict[str, Any], model: str) -> None:
    print(f"bench threshold: {model}, tune split {report['tune_pairs']} pairs, "
          f"held-out split {report['heldout_pairs']} pairs")
    print("tune split:  " + " | ".join(f"{m:<28}" for m in MODES))
    print("threshold  " + " | ".join(["true   false  prec.  recall    "] * len(MODES)))
    for row in report["table"]:
        mark = " <- chosen" if row["guard_on"]["threshold"] == report["chosen"] else ""
        cells = " | ".join(_cell(row[m]) + "    " for m in MODES)
        print(f"  {row['guard_on']['threshold']:.2f}     {cells}{mark}")
    print(f"rule: {report['rule']} -> {report['chosen']:.2f} (the shipped default, "
          f"{Settings.from_env({}).semantic.threshold:.2f}, is this rule on --lodo's domains)")
    print(f"tune split at {report['chosen']:.2f} by kind (paraphrases found, or near-misses "
          "let through): kind pairs " + " ".join(MODES))
    _kind_rows(report["tune_by_kind"])
    print(_heldout_line("verifier on", report["heldout_at_chosen"]))
    for mode in MODES:
        print(_heldout_line(mode.replace("_", " "), report["heldout"][mode]))
    print(f"held-out at the default {report['default']:.2f} by kind (paraphrases found, or "
          "near-misses let through): kind pairs " + " ".join(MODES))
    _kind_rows(report["heldout_by_kind"])
    cost = report["verify_ms"]
    print(f"verifier cost per verified candidate (word embeddings cached): "
          f"p50 {cost['p50']:.2f} ms, p99 {cost['p99']:.2f} ms")
    for mode, row in report.get("lookup_ms", {}).items():
        print(f"whole lookup, {mode.replace('_', ' ')} ({row['lookups']} lookups of the "
              f"held-out queries): p50 {row['p50']:.2f} ms, p99 {row['p99']:.2f} ms")
    for miss in report["heldout_false_hits_at_default"]:
        print(f"  held-out false hit: {miss['score']:.4f} {miss['stored']!r} / "
              f"{miss['query']!r}")
    for para in report["heldout_refused_paraphrases_at_default"]:
        print(f"  held-out paraphrase refused: {para['score']:.4f} {para['stored']!r} / "
              f"{para['query']!r} ({para['conflict']})")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from embedq.client import Client

    tune = load_pairs(Path(args.pairs_file) if args.pairs_file else TUNE)
    heldout_path = Path(args.heldout_file) if args.heldout_file else HELDOUT
    heldout = load_pairs(heldout_path)
    lodo = getattr(args, "lodo", None)  # "" for the default file
    learned = getattr(args, "learned", None)
    if getattr(args, "train_learned", False) and learned is None:
        raise InvalidInput("--train-learned goes with --learned: add --learned", "learned")
    if lodo is not None and learned is not None:
        raise InvalidInput("--lodo and --learned are two reports: pass one of them", "lodo")
    named = lodo if learned is None else learned
    domains = None if named is None else load_pairs(Path(named) if named else DOMAINS)
    settings = Settings.from_env()
    synonyms.use(settings.semantic.wordnet)
    with tempfile.TemporaryDirectory(prefix="embedq-bench-") as tmp:
        if settings.embedded:
            settings = settings.with_overrides(data_dir=Path(tmp))
        with Client(settings) as client:
            if domains is not None and learned is not None:
                return _learned(args, domains, heldout_path, heldout, client, settings)
            if domains is not None:
                from embedq.bench.lodo import lodo_report, print_lodo

                report = lodo_report(domains, _splits(heldout_path, heldout), client.embed,
                                     default=settings.semantic.threshold,
                                     known=known_words(settings))
                report["model"] = settings.model.model
                if not args.json:
                    print_lodo(report, settings.model.model)
                return report
            report = threshold_report(tune, heldout, client.embed,
                                      default=settings.semantic.threshold,
                                      known=known_words(settings))
            report["lookup_ms"] = lookup_cost(heldout, client)
    report["model"] = settings.model.model
    if not args.json:
        print_report(report, settings.model.model)
    return report


def _splits(path: Path, heldout: list[Pair]) -> dict[str, list[Pair]]:
    """The held-out split and the later ones --lodo and --learned report too."""
    return {path.stem: heldout, **{p.stem: load_pairs(p) for p in (FRESH, BLIND, BLIND2)}}


def _learned(args: argparse.Namespace, domains: list[Pair], heldout_path: Path,
             heldout: list[Pair], client: Client, settings: Settings) -> dict[str, Any]:
    from embedq.bench.learned import learned_report, print_learned, write_weights

    report = learned_report(domains, _splits(heldout_path, heldout), client.embed,
                            default=settings.semantic.threshold, known=known_words(settings))
    report["model"] = settings.model.model
    if args.train_learned:
        report["written"] = str(write_weights(report, settings.model.model))
    if not args.json:
        print_learned(report, settings.model.model)
        if args.train_learned:
            print(f"weights written to {report['written']}")
    return report
