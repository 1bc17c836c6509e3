"""The error budget's rule: the threshold a namespace runs at, from feedback on its hits.

A namespace may set `max_false_hit_rate` (say 0.01): of the hits it serves, at most that
share may be wrong. Callers report each served hit as correct or wrong (feedback); each
verdict keeps the hit's score and the threshold in force when it was served. The rule:

    the namespace runs at the smallest candidate threshold t at which the verdicts on
    hits it would still serve show no false hit, or a false-hit rate whose one-sided 95%
    Wilson upper bound is within the budget.

  candidates  the base threshold, and just above (+0.0001, rounded up) each wrong hit's
              score at or above it; the last candidate lies above every wrong hit, so a
              threshold is always found, and it is never below the base.
  the sample  at t: the verdicts with score >= t on hits served at a threshold <= t.
              A hit served at a higher threshold comes from a truncated population (the
              band below its threshold was never served), so counting it at t would
              dilute the false-hit rate of that band with hits above it.
  the bound   Wilson's score interval (z = 1.645): with 1 wrong hit in 500, the observed
              0.2% has an upper bound of 0.9%; with 1 in 50, 2% becomes 8.5%. The bound,
              not the observed rate, must fit the budget: a few lucky verdicts cannot
              keep a threshold that is wrong more often than the budget allows.

Why "no false hit" also stops the search: above the highest wrong hit there is no
evidence of error, and a bound that only reflects how few verdicts there are (0 in 20
bounds to 12%) would push the threshold to exact text and, with no hits left to judge,
keep it there. The rule moves only on evidence of wrong hits, and never lowers the
threshold below the base: with no wrong hit, a namespace runs at its base threshold.

The rule is a pure function of the verdicts (the most recent EMBEDQ_SEMANTIC_FEEDBACK_WINDOW
of them), recomputed on each verdict and each change of the budget, so every process that
reads the stored result runs at the same threshold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Z_95 = 1.6448536269514722  # one-sided 95%
STEP = 0.0001  # the threshold's resolution: "just above" a score
EXACT = 1.0  # the top of the scale: the exact text only


@dataclass(frozen=True)
class Verdict:
    """Feedback on one served hit."""

    score: float  # the hit's cosine score
    threshold: float  # the threshold in force when it was served
    correct: bool


def wilson_upper(false_hits: int, hits: int, z: float = Z_95) -> float:
    """The upper end of Wilson's score interval for false_hits / hits (1.0 for no hits)."""
    if hits <= 0:
        return 1.0
    p = false_hits / hits
    z2 = z * z
    centre = p + z2 / (2 * hits)
    spread = z * math.sqrt(p * (1 - p) / hits + z2 / (4 * hits * hits))
    return min(1.0, (centre + spread) / (1 + z2 / hits))


def just_above(score: float) -> float:
    """The smallest threshold on the STEP grid that a hit of `score` falls below."""
    return min(EXACT, round(math.floor(score / STEP + 1 + 1e-9) * STEP, 4))


def false_hit_bound(verdicts: Sequence[Verdict], threshold: float) -> tuple[int, int, float]:
    """(false hits, hits, upper bound) of the sample the rule reads at `threshold`."""
    sample = [v for v in verdicts
              if v.score >= threshold and v.threshold <= threshold + 1e-12]
    false_hits = sum(not v.correct for v in sample)
    return false_hits, len(sample), wilson_upper(false_hits, len(sample))


def budget_threshold(verdicts: Sequence[Verdict], base: float,
                     max_false_hit_rate: float) -> float:
    """The threshold the rule above sets for `verdicts` (never below `base`)."""
    candidates = sorted({base} | {
        just_above(v.score) for v in verdicts if not v.correct and v.score >= base})
    for threshold in candidates:
        false_hits, _, bound = false_hit_bound(verdicts, threshold)
        if false_hits == 0 or bound <= max_false_hit_rate:
            return threshold
    return candidates[-1]  # at EXACT a wrong hit scored 1.0: the negative refuses it
