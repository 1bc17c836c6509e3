"""Which keys are hot: a heavy-hitters sketch of the fingerprints (and semantic
namespaces) this process is asked for, merged cluster-wide in the hot store.

`HeavyHitters` keeps at most `capacity` counters in the Space-Saving family's batched form:
every key is counted in a dict; when it holds 4 x capacity keys, only the `capacity`
largest stay, and `floor` remembers the largest count dropped. A kept key's count is
therefore short of its true count by at most `floor`, and any key asked for more than
`floor` times since it was last dropped is kept: with `capacity` counters over a stream of
n asks, every key above n / capacity is found. The pruning is amortized over 3 x capacity
new keys, so a lookup pays a dict update per fingerprint.

Counts decay: every `half_life_s` they halve (lazily, on the next offer or read), so the
list says what is hot now, not what was hot at start.

`rates` turns the decayed counts into asks per second: a count spans the time since the
last halving plus each earlier half-life weighted by its halvings (since the process
started, and at least MIN_RATE_WINDOW_S), so a steady rate r reads as r. A process
publishes its namespaces' rates as the kind "namespace_per_s" next to its top counts;
summed over processes it is the cluster's lookups per second, and a namespace past
EMBEDQ_SEMANTIC_HOT_LOOKUPS_PER_S is hot (`hot_namespaces`: /metrics, `embedq cache stats`).

Each process publishes its `top` with the counters it writes anyway
(`CounterWriter`, at most every PUBLISH_S); `HotStore.hot_keys` sums what the live
processes published (each entry expires after PUBLISH_TTL_S), which is what /metrics and
`embedq stats` print.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

KINDS = ("fingerprint", "namespace")
RATES = "namespace_per_s"  # the published kind of namespace lookups per second
CAPACITY = 256
TOP_N = 20  # published per process and kind, and shown
HALF_LIFE_S = 300.0
PUBLISH_S = 10.0
PUBLISH_TTL_S = 60  # a process that stopped publishing drops out of the merged list
MIN_RATE_WINDOW_S = 10.0  # a young process's first asks are not read as a burst


class HeavyHitters:
    def __init__(self, capacity: int = CAPACITY, half_life_s: float = HALF_LIFE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = capacity
        self.half_life_s = half_life_s
        self._clock = clock
        self._lock = threading.Lock()
        self._counts: dict[str, float] = {}
        self.floor = 0.0
        self._decayed_at = self._started = clock()

    def offer(self, keys: Iterable[str]) -> None:
        """Count one ask for each key (a key repeated is asked for repeatedly)."""
        with self._lock:
            self._decay()
            counts = self._counts
            for key in keys:
                counts[key] = counts.get(key, 0.0) + 1.0
            if len(counts) > 4 * self.capacity:
                self._prune()

    def top(self, n: int = TOP_N) -> list[tuple[str, float]]:
        """The `n` most asked-for keys with their (decayed) counts, largest first."""
        with self._lock:
            self._decay()
            return heapq.nlargest(n, self._counts.items(), key=lambda kv: kv[1])

    def rates(self, n: int = TOP_N) -> list[tuple[str, float]]:
        """The `n` most asked-for keys with their asks per second, largest first."""
        with self._lock:
            self._decay()
            window = max(self._window_s(), MIN_RATE_WINDOW_S)
            top = heapq.nlargest(n, self._counts.items(), key=lambda kv: kv[1])
        return [(key, count / window) for key, count in top]

    def _window_s(self) -> float:
        """The seconds a decayed count spans: since the last halving at full weight, and
        each half-life before it (back to the start) at the weight its halvings left."""
        window = self._clock() - self._decayed_at
        end, weight = self._decayed_at, 0.5
        while end > self._started and weight > 1e-9:
            window += weight * (end - max(self._started, end - self.half_life_s))
            end -= self.half_life_s
            weight /= 2
        return window

    def _prune(self) -> None:
        kept = heapq.nlargest(self.capacity, self._counts.items(), key=lambda kv: kv[1])
        smallest_kept = kept[-1][1] if kept else 0.0
        dropped = max((c for c in self._counts.values() if c <= smallest_kept), default=0.0)
        self.floor = max(self.floor, dropped)
        self._counts = dict(kept)

    def _decay(self) -> None:
        now = self._clock()
        halvings = int((now - self._decayed_at) / self.half_life_s)
        if halvings <= 0:
            return
        self._decayed_at += halvings * self.half_life_s
        factor = 0.5 ** halvings
        self._counts = {k: c * factor for k, c in self._counts.items() if c * factor >= 0.5}
        self.floor *= factor


class HotKeys:
    """This process's sketches, one per kind (fingerprint, namespace)."""

    def __init__(self) -> None:
        self.sketches = {kind: HeavyHitters() for kind in KINDS}

    def offer(self, kind: str, keys: Iterable[str]) -> None:
        self.sketches[kind].offer(keys)

    def top(self) -> dict[str, list[tuple[str, float]]]:
        """The top counts per kind, and the namespaces' rates (RATES): what is published."""
        top = {kind: sketch.top() for kind, sketch in self.sketches.items()}
        top[RATES] = self.sketches["namespace"].rates()
        return top


def hot_namespaces(merged: dict[str, list[tuple[str, float]]], per_s: float
                   ) -> list[tuple[str, float]]:
    """The namespaces looked up more than `per_s` times a second (summed over the live
    processes), busiest first: at most TOP_N, so a metric labelled by them stays small."""
    return [(ns, rate) for ns, rate in merged.get(RATES, []) if rate > per_s]


def live_hot_keys(published: dict[str, dict[str, Any]], now: float | None = None
                  ) -> tuple[dict[str, list[tuple[str, float]]], list[str]]:
    """From what processes published (`{"at", "top"}` by process id): the merged top per
    kind of those within PUBLISH_TTL_S, and the ids of the stale ones to drop."""
    now = time.time() if now is None else now
    fresh = {pid: e for pid, e in published.items() if now - e["at"] <= PUBLISH_TTL_S}
    stale = [pid for pid in published if pid not in fresh]
    merged = {kind: merge([[(k, float(c)) for k, c in e["top"].get(kind, [])]
                           for e in fresh.values()]) for kind in (*KINDS, RATES)}
    return merged, stale


def merge(published: Iterable[list[tuple[str, float]]], n: int = TOP_N
          ) -> list[tuple[str, float]]:
    """The cluster's top `n`: the processes' published counts summed per key."""
    total: dict[str, float] = {}
    for entries in published:
        for key, count in entries:
            total[key] = total.get(key, 0.0) + count
    return heapq.nlargest(n, total.items(), key=lambda kv: kv[1])


__all__ = ["KINDS", "PUBLISH_S", "PUBLISH_TTL_S", "RATES", "HeavyHitters", "HotKeys",
           "hot_namespaces", "live_hot_keys", "merge"]
