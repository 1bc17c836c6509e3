"""Hot keys: the heavy-hitters sketch finds the most asked-for keys of a skewed stream
with bounded error, decays, reads a steady rate as itself, and the stores merge what
processes publish."""

from __future__ import annotations

import random
import time
from collections import Counter

from embedq.coordination.hot_keys import (
    PUBLISH_TTL_S,
    RATES,
    HeavyHitters,
    HotKeys,
    hot_namespaces,
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


def test_a_steady_rate_reads_as_itself_across_halvings() -> None:
    now = [0.0]
    sketch = HeavyHitters(half_life_s=60.0, clock=lambda: now[0])
    for second in range(1, 601):  # 5 lookups a second of "faq", 1 of "docs", for 10 min
        now[0] = float(second)
        sketch.offer(["faq"] * 5 + ["docs"])
    rates = dict(sketch.rates())
    assert abs(rates["faq"] - 5.0) < 0.1 and abs(rates["docs"] - 1.0) < 0.02  # asks per 1 s step
    now[0] += 120.0  # two quiet half-lives: the rate falls, the lookups are still counted
    assert 0.9 < dict(sketch.rates())["faq"] < 5.0 / 2


def test_a_young_process_reads_its_first_asks_over_the_minimum_window() -> None:
    now = [0.0]
    sketch = HeavyHitters(clock=lambda: now[0])
    now[0] = 0.5
    sketch.offer(["faq"] * 5)
    assert sketch.rates() == [("faq", 0.5)]  # 5 asks over 10 s, not 10 a second


def test_hot_namespaces_are_those_past_the_rate_summed_over_processes() -> None:
    now = time.time()
    published = {
        "p1": {"at": now, "top": {RATES: [["faq", 3.0], ["docs", 0.5]]}},
        "p2": {"at": now, "top": {RATES: [["faq", 2.5], ["misc", 0.1]]}},
    }
    merged, _ = live_hot_keys(published, now)
    assert hot_namespaces(merged, 5.0) == [("faq", 5.5)]
    assert hot_namespaces(merged, 0.4) == [("faq", 5.5), ("docs", 0.5)]
    assert [kind for kind in HotKeys().top()] == ["fingerprint", "namespace", RATES]
