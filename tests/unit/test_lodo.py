"""The 95% Wilson interval `embedq bench threshold --lodo` reports each rate with."""

from __future__ import annotations

import pytest

from embedq.bench.lodo import rate, wilson


def test_the_wilson_interval_matches_known_values() -> None:
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)


def test_no_trials_say_nothing_is_known() -> None:
    assert wilson(0, 0) == (0.0, 1.0)
    assert rate(0, 0)["rate"] is None


def test_a_rate_lies_inside_its_interval() -> None:
    for k, n in ((1, 3), (7, 51), (84, 621)):
        row = rate(k, n)
        assert row["low"] <= row["rate"] <= row["high"]
