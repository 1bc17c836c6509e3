"""The content slot's word bar chosen leave-one-domain-out with the threshold (part of
`embedq bench threshold --lodo`).

The verifier's content slot takes a word as another's counterpart when the two, embedded
alone, score at least `min_word_similarity` (align.DEFAULT_MIN_WORD_SIMILARITY, 0.6, from
the tune split). Is that bar a tuned number that generalizes? For each domain D and each
bar of BARS, the bench's threshold rule (`lodo.choose_on`) runs on every other domain;
the bar whose safe threshold finds the most paraphrases there (ties: the higher bar, the
stricter) is the one D is scored with, at that threshold. Summed over domains this is the
leave-one-domain-out figure of choosing the bar too, next to the fixed bar's. Then, per
bar, the rule on every domain and the other splits at the configured default threshold:
what moving the default bar would change on text the choice never saw.
"""

from __future__ import annotations

from typing import Any

from embedq.bench.threshold import Embed, Pair, Scored, _mode, figures, score_pairs
from embedq.semantic.align import DEFAULT_MIN_WORD_SIMILARITY
from embedq.semantic.verify import Verifier

BARS = (0.5, 0.55, DEFAULT_MIN_WORD_SIMILARITY, 0.65)


def word_bar_report(pairs: list[Pair], heldout: dict[str, list[Pair]], embed: Embed,
                    default: float, known: frozenset[str]) -> dict[str, Any]:
    """The report (see the module); `pairs` name their domains, `heldout` the other
    splits, `default` the configured threshold."""
    from embedq.bench.lodo import _at, breakdown, choose_on, domains_of

    every = pairs + [p for split in heldout.values() for p in split]
    scored = {bar: score_pairs(every, embed, Verifier(embed, known=known,
                                                      min_word_similarity=bar))
              for bar in BARS}
    n = len(pairs)
    decided: list[tuple[Scored, bool]] = []
    chosen: dict[str, float] = {}
    for domain in domains_of(pairs, "--lodo", 2):
        best: tuple[int, float, float] | None = None
        for bar in BARS:
            others = [s for s in scored[bar][:n] if s.pair.domain != domain]
            threshold, safe = choose_on(others)
            found = figures(others, threshold, *_mode("verifier_on"))["true_hits"]
            if safe and (best is None or (found, bar) > best[:2]):
                best = (found, bar, threshold)
        bar, threshold = (best[1], best[2]) if best else (BARS[-1], choose_on(
            [s for s in scored[BARS[-1]][:n] if s.pair.domain != domain])[0])
        chosen[domain] = bar
        decided += _at([s for s in scored[bar][:n] if s.pair.domain == domain], threshold)
    per_bar = {}
    for bar in BARS:
        threshold, safe = choose_on(scored[bar][:n])
        whole = figures(scored[bar][:n], threshold, *_mode("verifier_on"))
        splits, start = {}, n
        for name, split in heldout.items():
            part = scored[bar][start:start + len(split)]
            start += len(split)
            splits[name] = breakdown(_at(part, default))
        per_bar[bar] = {"threshold": threshold, "safe": safe, "found": whole["true_hits"],
                        "served": whole["false_hits"], "splits": splits}
    return {"bars": list(BARS), "fixed": DEFAULT_MIN_WORD_SIMILARITY,
            "chosen_per_domain": chosen, "lodo": breakdown(decided), "per_bar": per_bar}


def print_word_bar(report: dict[str, Any], default: float) -> None:
    lodo = report["lodo"]
    found, served = lodo["paraphrases_found"], lodo["near_misses_served"]
    counts: dict[float, int] = {}
    for bar in report["chosen_per_domain"].values():
        counts[bar] = counts.get(bar, 0) + 1
    print(f"the content slot's word bar (fixed {report['fixed']}) chosen with the threshold "
          f"on the other domains, from {', '.join(map(str, report['bars']))}: paraphrases "
          f"found {found['k']}/{found['n']}, near-misses served {served['k']}/{served['n']} "
          "(bars chosen: " + ", ".join(f"{b} x{c}" for b, c in sorted(counts.items()))
          + ")")
    names = list(next(iter(report["per_bar"].values()))["splits"])
    print(f"  bar   the rule on every domain   other splits at the default {default:.2f}, "
          "found / served: " + ", ".join(names))
    for bar, row in report["per_bar"].items():
        cells = "  ".join(f"{r['paraphrases_found']['k']:>3}/{r['near_misses_served']['k']}"
                          for r in row["splits"].values())
        mark = "" if row["safe"] else " (none safe)"
        print(f"  {bar:<5} {row['threshold']:.2f}: {row['found']:>4} found, "
              f"{row['served']} served{mark:<6}  {cells}")
