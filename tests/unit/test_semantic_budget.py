"""The error budget's threshold rule (embedq/semantic/budget.py) and a namespace's
policy (feedback.Policy): pure functions of the verdicts, pinned case by case."""

from __future__ import annotations

import pytest

from embedq.semantic.budget import (
    EXACT,
    Z_95,
    Verdict,
    budget_threshold,
    false_hit_bound,
    just_above,
    wilson_upper,
)
from embedq.semantic.feedback import Policy

BASE = 0.70
BUDGET = 0.01


def right(score: float, served_at: float = BASE) -> Verdict:
    return Verdict(score, served_at, True)


def wrong(score: float, served_at: float = BASE) -> Verdict:
    return Verdict(score, served_at, False)


def spread(n: int, low: float, high: float, served_at: float = BASE) -> list[Verdict]:
    """`n` correct verdicts with scores evenly spread over [low, high]."""
    return [right(low + (high - low) * i / max(n - 1, 1), served_at) for i in range(n)]


def test_wilson_upper_bound_values() -> None:
    assert wilson_upper(0, 0) == 1.0
    assert wilson_upper(0, 20) == pytest.approx(Z_95**2 / (20 + Z_95**2))
    assert wilson_upper(1, 500) == pytest.approx(0.00891, abs=1e-5)
    assert wilson_upper(1, 50) == pytest.approx(0.0848, abs=1e-4)
    assert wilson_upper(5, 5) == pytest.approx(1.0)


@pytest.mark.parametrize(("false_hits", "hits"), [(0, 10), (1, 10), (1, 300), (30, 100)])
def test_the_bound_is_above_the_observed_rate_and_shrinks_with_evidence(
        false_hits: int, hits: int) -> None:
    assert wilson_upper(false_hits, hits) > false_hits / hits
    assert wilson_upper(false_hits * 10, hits * 10) < wilson_upper(false_hits, hits)


def test_just_above_is_the_next_step_past_a_score() -> None:
    assert just_above(0.8) == 0.8001
    assert just_above(0.83624) == 0.8363
    assert just_above(0.99995) == EXACT
    assert just_above(1.0) == EXACT


def test_no_feedback_or_only_correct_hits_keep_the_base() -> None:
    assert budget_threshold([], BASE, BUDGET) == BASE
    assert budget_threshold(spread(40, 0.70, 0.99), BASE, BUDGET) == BASE


def test_one_wrong_hit_without_evidence_around_it_raises_the_threshold_past_it() -> None:
    assert budget_threshold([wrong(0.8)], BASE, BUDGET) == 0.8001
    assert budget_threshold([wrong(0.8), *spread(50, 0.70, 0.99)], BASE, BUDGET) == 0.8001


def test_a_wrong_hit_within_the_budget_bound_keeps_the_threshold() -> None:
    verdicts = [wrong(0.75), *spread(1000, 0.70, 0.99)]
    assert false_hit_bound(verdicts, BASE)[:2] == (1, 1001)
    assert budget_threshold(verdicts, BASE, BUDGET) == BASE


def test_the_smallest_threshold_whose_bound_fits_wins_not_the_highest_wrong_hit() -> None:
    # 20 wrong hits low in the band and one high among 1000 correct: past the low ones
    # the bound (1 in 1000: 0.45%) fits a 1% budget, so the high one does not move it.
    verdicts = ([wrong(0.71)] * 10 + [wrong(0.72)] * 10 + [wrong(0.95)]
                + spread(1000, 0.80, 0.99))
    assert budget_threshold(verdicts, BASE, BUDGET) == 0.7201
    assert budget_threshold(verdicts, BASE, 0.001) == 0.9501


def test_hits_served_at_a_higher_threshold_do_not_vouch_for_the_band_below_it() -> None:
    # Raised past a wrong hit at 0.75; 2000 correct hits served since, all above 0.7501.
    # Pooled, 1 in 2001 would fit the budget at 0.70; but none of them could have been
    # served in [0.70, 0.7501), so they say nothing about that band.
    verdicts = [wrong(0.75), *spread(2000, 0.7501, 0.99, served_at=0.7501)]
    assert false_hit_bound(verdicts, BASE) == (1, 1, pytest.approx(1.0))
    assert budget_threshold(verdicts, BASE, BUDGET) == 0.7501


def test_wrong_hits_below_the_base_never_lower_it() -> None:
    assert budget_threshold([wrong(0.5, served_at=0.4)], BASE, BUDGET) == BASE
    assert budget_threshold([wrong(0.8)], 0.85, BUDGET) == 0.85


def test_a_zero_budget_goes_past_every_wrong_hit() -> None:
    verdicts = [wrong(0.71), wrong(0.9), *spread(5000, 0.70, 0.99)]
    assert budget_threshold(verdicts, BASE, 0.0) == 0.9001


def test_a_wrong_hit_at_score_one_leaves_only_the_exact_text() -> None:
    assert budget_threshold([wrong(1.0)], BASE, BUDGET) == EXACT


def test_policy_thresholds() -> None:
    assert Policy().runs_at(0.7) == 0.7 and Policy().floor() is None
    assert Policy(base_threshold=0.8).runs_at(0.7) == 0.8
    budgeted = Policy(base_threshold=None, max_false_hit_rate=0.01, threshold=0.8363)
    assert budgeted.runs_at(0.7) == 0.8363 and budgeted.floor() == 0.8363


def test_policy_trust_score_needs_a_budget_and_never_goes_below_its_base() -> None:
    assert Policy().trusts_above() is None
    # A base trust score without a budget (a row written before the budget was unset)
    # serves nothing over the verifier: the budget is what would raise it.
    assert Policy(base_trust_score=0.9).trusts_above() is None
    assert Policy(max_false_hit_rate=0.02).trusts_above() is None
    assert Policy(max_false_hit_rate=0.02, base_trust_score=0.9).trusts_above() == 0.9
    raised = Policy(max_false_hit_rate=0.02, base_trust_score=0.9, trust_score=0.9282)
    assert raised.trusts_above() == 0.9282
    # Configured above what feedback derived from an older base: the new base holds.
    assert Policy(max_false_hit_rate=0.02, base_trust_score=0.95,
                  trust_score=0.9282).trusts_above() == 0.95
