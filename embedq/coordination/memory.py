"""The hot store inside one process (embedded mode and tests), with Redis's semantics."""

from __future__ import annotations

import threading
import time
from typing import Any

from embedq.coordination import layout
from embedq.coordination.hot_keys import live_hot_keys
from embedq.coordination.store import (
    COUNTERS,
    HISTOGRAMS,
    BatchRecord,
    Claimed,
    HistogramSnapshot,
    Hold,
    HotStore,
    Interest,
    Leased,
    Settled,
    bucket_index,
    check_interest,
)


class MemoryHotStore(HotStore):
    """All of HotStore inside one process, under one mutex.

    Expired keys are dropped on read and by a sweep every max(SWEEP_MIN_WRITES, size / 4)
    writes: O(1) per write amortized, and a long-running `embedq serve` holds at most
    about 1.25 times its live keys plus SWEEP_MIN_WRITES, whatever is never read again."""

    SWEEP_MIN_WRITES = 1024

    def __init__(self) -> None:
        super().__init__()
        self._data: dict[str, tuple[object, float]] = {}
        self._writes = 0  # since the last sweep
        self._mutex = threading.Lock()
        self._stats: dict[str, int] = {}
        self._hists: dict[str, tuple[list[int], float, int]] = {}
        self._hot_keys: dict[str, dict[str, Any]] = {}
        self._workers: dict[str, tuple[float, dict[str, object]]] = {}

    # --- keys with a ttl (the mutex is held)
    def _get(self, key: str) -> object | None:
        item = self._data.get(key)
        if item is None:
            return None
        value, expires = item
        if expires and expires < time.monotonic():
            del self._data[key]
            return None
        return value

    def _set(self, key: str, value: object, ttl_s: float) -> None:
        self._data[key] = (value, time.monotonic() + ttl_s if ttl_s else 0.0)
        self._writes += 1
        if self._writes >= max(self.SWEEP_MIN_WRITES, len(self._data) // 4):
            self._sweep()

    def _sweep(self) -> None:
        now = time.monotonic()
        for key in [k for k, (_, expires) in self._data.items() if expires and expires < now]:
            del self._data[key]
        self._writes = 0

    def __len__(self) -> int:
        """Keys held, expired ones not swept yet included."""
        with self._mutex:
            return len(self._data)

    # --- hot vectors and outcomes
    def vectors(self, fps: list[str]) -> list[bytes | None]:
        with self._mutex:
            return [self._get(layout.vector(fp)) for fp in fps]  # type: ignore[misc]

    def settled(self, fps: list[str]) -> Settled:
        out = Settled({}, {}, [])
        with self._mutex:
            for fp in fps:
                vector = self._get(layout.vector(fp))
                failure = self._get(layout.failure(fp)) if vector is None else None
                if vector is not None:
                    out.vectors[fp] = vector  # type: ignore[assignment]
                elif failure is not None:
                    out.failures[fp] = dict(failure)  # type: ignore[call-overload]
                else:
                    out.pending.append(fp)
        return out

    def record_batch(self, batch: BatchRecord) -> None:
        with self._mutex:
            for vectors, ttl_s in batch.vectors:
                for fp, blob in vectors.items():
                    self._set(layout.vector(fp), blob, ttl_s)
            now = time.monotonic()
            for fp, blob in batch.wanted.items():
                if self._interest(fp, now):
                    self._set(layout.vector(fp), blob, batch.wanted_ttl_s)
            for fp, info in batch.failures.items():
                self._set(layout.failure(fp), dict(info), batch.failure_ttl_s)
            for fp in batch.forget_attempts:
                self._data.pop(layout.attempts(fp), None)
            for fp in batch.free_claims:
                self._data.pop(layout.claim(fp), None)
            self._add(batch.counts)
            for observed in batch.observations:
                for name, value in observed.items():
                    buckets, total, count = self._hists.get(
                        name, ([0] * (len(HISTOGRAMS[name]) + 1), 0.0, 0))
                    buckets[bucket_index(name, value)] += 1
                    self._hists[name] = (buckets, total + value, count + 1)
        if batch.done:
            self._dispatch(list(batch.done))

    # --- claims and run leases
    def claim(self, fps: list[str], owner: str, ttl_ms: int,
              interest: Interest | None = None) -> Claimed:
        check_interest(interest)
        won: list[str] = []
        lost: list[str] = []
        with self._mutex:
            if interest is not None:
                self._want(interest)
            for fp in fps:
                holder = self._get(layout.claim(fp))
                if holder is None or holder == owner:
                    self._set(layout.claim(fp), owner, ttl_ms / 1000)
                    self._data.pop(layout.failure(fp), None)
                    won.append(fp)
                else:
                    lost.append(fp)
        return Claimed(won, lost)

    def lease(self, fps: list[str], owner: str, ttl_ms: int) -> Leased:
        out = Leased({}, {}, [])
        with self._mutex:
            for fp in fps:
                vector = self._get(layout.vector(fp))
                if vector is not None:
                    out.stored[fp] = vector  # type: ignore[assignment]
                elif self._get(layout.run_lease(fp)) is None:
                    self._set(layout.run_lease(fp), owner, ttl_ms / 1000)
                    out.won[fp] = int(self._get(layout.attempts(fp)) or 0)  # type: ignore[call-overload]
                else:
                    out.held.append(fp)
        return out

    def holders(self, hold: Hold, fps: list[str]) -> list[str | None]:
        with self._mutex:
            return [self._get(layout.held(hold, fp)) for fp in fps]  # type: ignore[misc]

    def release(self, hold: Hold, fps: list[str], owner: str | None = None) -> None:
        with self._mutex:
            for fp in fps:
                name = layout.held(hold, fp)
                if owner is None or self._get(name) == owner:
                    self._data.pop(name, None)

    def extend_leases(self, fps: list[str], ttl_ms: int) -> None:
        with self._mutex:
            for fp in fps:
                value = self._get(layout.run_lease(fp))
                if value is not None:
                    self._set(layout.run_lease(fp), value, ttl_ms / 1000)

    # --- attempts
    def count_attempts(self, fps: list[str], ttl_s: int) -> list[int]:
        out = []
        with self._mutex:
            for fp in fps:
                n = int(self._get(layout.attempts(fp)) or 0) + 1  # type: ignore[call-overload]
                self._set(layout.attempts(fp), n, ttl_s)
                out.append(n)
        return out

    def forget_attempts(self, fps: list[str]) -> None:
        with self._mutex:
            for fp in fps:
                self._data.pop(layout.attempts(fp), None)

    def attempts(self, fps: list[str]) -> list[int]:
        with self._mutex:
            return [int(self._get(layout.attempts(fp)) or 0) for fp in fps]  # type: ignore[call-overload]

    # --- interest
    def _want(self, interest: Interest) -> None:
        now = time.monotonic()
        until = now + interest.ttl_ms / 1000
        for fp, callers in interest.callers.items():
            held = self._interest(fp, now)
            for caller in callers:
                held[caller] = max(held.get(caller, until), until)
            if held:
                self._set(layout.interest(fp), held, max(held.values()) - now)

    def unwant(self, callers: dict[str, list[str]]) -> None:
        with self._mutex:
            now = time.monotonic()
            for fp, ids in callers.items():
                held = self._interest(fp, now)
                for caller in ids:
                    held.pop(caller, None)
                if held:
                    self._set(layout.interest(fp), held, max(held.values()) - now)
                else:
                    self._data.pop(layout.interest(fp), None)

    def drop_unwanted(self, owners: list[tuple[str, str]]) -> list[str]:
        dropped: list[str] = []
        with self._mutex:
            now = time.monotonic()
            for fp, owner in owners:
                if self._interest(fp, now):
                    continue
                if self._get(layout.claim(fp)) == owner:
                    self._data.pop(layout.claim(fp), None)
                if fp not in dropped:
                    dropped.append(fp)
            self._add({"abandoned": len(dropped)})
        return dropped

    def _interest(self, fp: str, now: float) -> dict[str, float]:
        """The callers whose interest in `fp` has not ended (a copy; the mutex is held)."""
        held: dict[str, float] = self._get(layout.interest(fp)) or {}  # type: ignore[assignment]
        return {caller: until for caller, until in held.items() if until > now}

    # --- counters
    def _add(self, counts: dict[str, int]) -> None:
        for name, n in counts.items():
            if n:
                self._stats[name] = self._stats.get(name, 0) + n

    def incr(self, counts: dict[str, int]) -> None:
        with self._mutex:
            self._add(counts)

    def counters(self) -> dict[str, int]:
        with self._mutex:
            return {name: self._stats.get(name, 0) for name in (*COUNTERS, *self._stats)}

    def histograms(self) -> dict[str, HistogramSnapshot]:
        with self._mutex:
            return {
                name: HistogramSnapshot(HISTOGRAMS[name], tuple(b), total, count)
                for name, (b, total, count) in self._hists.items()
            }

    # --- liveness
    def heartbeat(self, worker_id: str, info: dict[str, object], ttl_s: int) -> None:
        with self._mutex:
            self._workers[worker_id] = (time.monotonic() + ttl_s, dict(info))

    def forget_worker(self, worker_id: str) -> None:
        with self._mutex:
            self._workers.pop(worker_id, None)

    def live_workers(self) -> dict[str, dict[str, object]]:
        now = time.monotonic()
        with self._mutex:
            for worker_id in [w for w, (until, _) in self._workers.items() if until <= now]:
                del self._workers[worker_id]
            return {w: dict(info) for w, (_, info) in self._workers.items()}

    def note_chunk_progress(self, job_id: str, chunk: int, done: int, ttl_s: int) -> None:
        with self._mutex:
            key = layout.chunk_progress(job_id)
            got = self._get(key)
            notes = dict(got) if isinstance(got, dict) else {}
            notes[chunk] = done
            self._set(key, notes, ttl_s)

    def chunk_progress(self, job_id: str) -> dict[int, int]:
        with self._mutex:
            got = self._get(layout.chunk_progress(job_id))
        return dict(got) if isinstance(got, dict) else {}

    def publish_hot_keys(self, process_id: str,
                         top: dict[str, list[tuple[str, float]]]) -> None:
        with self._mutex:
            self._hot_keys[process_id] = {"at": time.time(), "top": top}

    def hot_keys(self) -> dict[str, list[tuple[str, float]]]:
        with self._mutex:
            live, stale = live_hot_keys(dict(self._hot_keys))
            for process_id in stale:
                del self._hot_keys[process_id]
        return live

    def ping(self) -> None:
        return None
