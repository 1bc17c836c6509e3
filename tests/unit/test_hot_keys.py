"""Hot keys: the heavy-hitters sketch finds the most asked-for keys of a skewed stream
with bounded error, decays, and the stores merge what processes publish."""

from __future__ import annotations

import random
import time
from collections import Counter

from embedq.coordination.hot_keys import (
    PUBLISH_TTL_S,
    HeavyHitters,
    HotKeys,
    live_hot_keys,
    merge,
)
from embedq.coordination.store import HotStore


def zipf_stream(n: int, keys: int, s: float, seed: int) -> list[str]:
    rng = random.Random(seed)
    weights = [1 / (rank ** s) for rank in range(1, keys + 1)]
    return [f"k{i}" for i in rng.choices(range(keys), weights=weights, k=n)]


def test_the_true_heaviest_keys_of_a_zipf_stream_are_found() -> None:
    stream = zipf_stream(100_000, 50_000, 1.1, seed=7)
    sketch = HeavyHitters(capacity=256)
    for start in range(0, len(stream), 100):  # as requests of 100 texts arrive
        sketch.offer(stream[start:start + 100])
    truth = Counter(stream)
    true_top = [k for k, _ in truth.most_common(10)]
    found = dict(sketch.top(20))
    assert all(k in found for k in true_top)
    for key, count in found.items():
        # A kept count is short of the truth by at most the floor, never above it.
        assert truth[key] - sketch.floor <= count <= truth[key]


def test_a_uniform_stream_keeps_only_the_capacity_and_reports_its_floor() -> None:
    sketch = HeavyHitters(capacity=16)
    sketch.offer(f"k{i}" for i in range(10_000))
    assert len(sketch.top(1000)) <= 4 * 16
    assert sketch.floor == 1.0  # every dropped key had been asked once


def test_counts_halve_every_half_life() -> None:
    now = [0.0]
    sketch = HeavyHitters(half_life_s=10.0, clock=lambda: now[0])
    sketch.offer(["a"] * 8 + ["b"])
    now[0] = 20.0
    assert sketch.top() == [("a", 2.0)]  # b's half ask dropped out


def test_merge_sums_the_processes_counts() -> None:
    merged = merge([[("a", 3.0), ("b", 1.0)], [("b", 5.0)], []], n=2)
    assert merged == [("b", 6.0), ("a", 3.0)]


def test_a_process_that_stopped_publishing_drops_out() -> None:
    now = time.time()
    published = {
        "live": {"at": now, "top": {"fingerprint": [["a", 2.0]]}},
        "gone": {"at": now - PUBLISH_TTL_S - 1, "top": {"fingerprint": [["b", 9.0]]}},
    }
    merged, stale = live_hot_keys(published, now)
    assert merged["fingerprint"] == [("a", 2.0)] and merged["namespace"] == []
    assert stale == ["gone"]


def test_the_stores_merge_what_processes_publish(store: HotStore) -> None:
    one, two = HotKeys(), HotKeys()
    one.offer("fingerprint", ["fp1", "fp1", "fp2"])
    two.offer("fingerprint", ["fp1"])
    two.offer("namespace", ["docs"])
    store.publish_hot_keys("p1", one.top())
    store.publish_hot_keys("p2", two.top())
    store.publish_hot_keys("p2", two.top())  # a process replaces what it published
    got = store.hot_keys()
    assert got["fingerprint"] == [("fp1", 3.0), ("fp2", 1.0)]
    assert got["namespace"] == [("docs", 1.0)]
