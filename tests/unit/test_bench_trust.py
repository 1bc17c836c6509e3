"""bench/trust.py's decisions on scored pairs built by hand: what is served over a trust
score, and the feedback loop deriving the score again after each verdict by the budget's
rule (the same function the cache applies)."""

from __future__ import annotations

import pytest

from embedq.bench.threshold import Pair, Scored
from embedq.bench.trust import feedback_loop, print_trust, served, trust_report
from embedq.semantic.budget import just_above
from embedq.semantic.verify import Conflict

CONTENT = Conflict("content", "attach", "upload")
NUMBER = Conflict("number", "3", "5")


def _scored(score: float, label: str = "paraphrase", conflict: Conflict | None = CONTENT,
            contrasting: bool = False) -> Scored:
    kind = "paraphrase" if label == "paraphrase" else "antonym"
    return Scored(Pair(f"stored {score}", f"asked {score}", label, kind, "d"), score,
                  contrasting, conflict)


def test_only_a_model_judged_conflict_at_or_above_the_trust_score_is_served_over() -> None:
    assert served(_scored(0.93, conflict=None), 0.67, None) == (True, False)
    assert served(_scored(0.93), 0.67, None) == (False, False)
    assert served(_scored(0.93), 0.67, 0.9) == (True, True)
    assert served(_scored(0.9), 0.67, 0.9) == (True, True)
    assert served(_scored(0.89), 0.67, 0.9) == (False, False)
    assert served(_scored(0.99, conflict=NUMBER), 0.67, 0.5) == (False, False)
    assert served(_scored(0.99, contrasting=True), 0.67, 0.5) == (False, False)
    # Never below the threshold, whatever the trust score.
    assert served(_scored(0.6), 0.67, 0.5) == (False, False)


def test_a_wrong_hit_over_the_trust_score_raises_it_past_that_hit() -> None:
    pairs = [_scored(0.91), _scored(0.92), _scored(0.95, "near_miss"), _scored(0.97),
             _scored(0.94), _scored(0.8, conflict=None)]
    runs = {feedback_loop(pairs, 0.67, 0.9, 0.05, seed)["trust"] for seed in range(6)}
    # Wherever the wrong hit comes in the order, one wrong in a handful of verdicts
    # bounds far past any budget: the score ends just above it.
    assert runs == {just_above(0.95)}
    clean = feedback_loop([p for p in pairs if p.pair.label == "paraphrase"], 0.67, 0.9,
                          0.05, 1)
    assert (clean["trust"], clean["found"], clean["served"], clean["over_trust"]) == (
        0.9, 5, 0, 4)


def test_the_loop_looks_up_the_share_of_near_misses_it_is_given() -> None:
    pairs = [_scored(0.91 + i / 1000) for i in range(20)] + [
        _scored(0.95 + i / 1000, "near_miss") for i in range(10)]
    none = feedback_loop(pairs, 0.67, 0.9, 0.05, 3, share=0.0)
    assert (none["found"], none["served"], none["trust"]) == (20, 0, 0.9)
    every = feedback_loop(pairs, 0.67, 0.9, 0.05, 3, share=1.0)
    assert every["served"] >= 1 and every["trust"] > 0.95


def test_the_report_prints_each_score_and_says_where_a_budget_changed_nothing(
        capsys: pytest.CaptureFixture[str]) -> None:
    domains = [_scored(0.91 + i / 1000) for i in range(20)] + [
        _scored(0.95 + i / 1000, "near_miss") for i in range(10)]
    report = trust_report(len(domains), domains, {"held": domains[:3]}, 0.67)
    assert report["per_score"]["0.9"]["domains"] == {
        "found": 20, "served": 10, "paraphrases": 20, "near_misses": 10}
    assert report["per_score"]["None"]["domains"]["found"] == 0
    print_trust(report)
    out = capsys.readouterr().out
    assert "  none      0/20     0.0%     0/10        -     0/0" in out
    assert "  0.9      20/20   100.0%    10/10     33.3%     3/0" in out
    assert "the same as budget 0.01" in out
