"""The semantic replica's budget: which namespaces a process keeps in memory, which it
drops past EMBEDQ_SEMANTIC_MEMORY_MB, and the watermarks it follows them by."""

from __future__ import annotations

import numpy as np

from embedq.semantic.index import ExactIndex
from embedq.semantic.residency import HELD_BYTES, Residency


def _index(n: int, dimension: int = 8) -> ExactIndex:
    index = ExactIndex(dimension)
    rows = np.random.default_rng(n).standard_normal((n, dimension)).astype(np.float32)
    index.add(range(1, n + 1), rows)
    return index


def test_the_least_recently_used_are_dropped_past_the_budget() -> None:
    sizes = {ns: _index(100).memory_bytes() for ns in ("a", "b", "c")}
    held = Residency(budget_bytes=2 * (sizes["a"] + HELD_BYTES))
    for ns in ("a", "b"):
        held.admit(ns, 0)
    assert held.over_budget(sizes) == []
    held.touch("a")  # b is now the least recently used
    held.admit("c", 0)
    assert held.over_budget(sizes, keep="c") == ["b"]
    held.drop("b")
    assert (held.held(), held.loads, held.evictions) == (["a", "c"], 3, 1)
    assert held.cost(sizes) == sizes["a"] + sizes["c"] + 2 * HELD_BYTES


def test_the_namespace_in_use_is_kept_even_alone_past_the_budget() -> None:
    sizes = {"big": _index(500).memory_bytes(), "small": _index(10).memory_bytes()}
    held = Residency(budget_bytes=sizes["big"] // 2)
    held.admit("small", 0)
    held.admit("big", 0)
    assert held.over_budget(sizes, keep="big") == ["small"]
    held.drop("small")
    assert held.over_budget(sizes, keep="big") == []


def test_empty_namespaces_count_their_bookkeeping() -> None:
    held = Residency(budget_bytes=3 * HELD_BYTES)
    for i in range(5):
        held.admit(f"empty{i}", 0)
    assert held.over_budget({}, keep="empty4") == ["empty0", "empty1"]


def test_a_namespace_follows_the_log_from_its_own_watermark() -> None:
    held = Residency(budget_bytes=10**9)
    held.admit("old", 40)
    held.admit("new", 90)  # loaded later, exact at a later watermark
    assert held.low_watermark() == 40
    assert held.behind("old", 50) and not held.behind("new", 50)
    assert not held.behind("not-held", 50)
    held.advance(120)
    assert held.watermarks == {"old": 120, "new": 120}
    held.drop("old")
    assert not held.behind("old", 130) and "old" not in held
