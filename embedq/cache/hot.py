"""The hot tier and coordination store: vectors, claims, leases, counters, notifications.

`HotStore` is the interface; `MemoryHotStore` (embedded mode and unit tests) and
`RedisHotStore` (every real deployment) implement it, and the same tests run on both.
"""

from __future__ import annotations

import bisect
import json
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from embedq.cache import keys

Listener = Callable[[list[str]], None]

COUNTERS = (
    "requests", "texts", "cache_hits", "coalesced", "submitted", "encoded", "batches",
    "failed", "dead_lettered", "upstream_calls", "upstream_tokens", "tokens_saved",
    "calls_saved", "lookups", "refused", "abandoned",
)


# Cluster-wide histograms: name -> upper bounds of the buckets (a last +Inf bucket is
# implied). Workers observe; any process (the API's /metrics) reads them back.
HISTOGRAMS: dict[str, tuple[float, ...]] = {
    "batch_texts": (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
    "batch_tokens": (64, 256, 1024, 2048, 4096, 8192, 16384, 32768, 65536),
    "encode_seconds": (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
}


@dataclass(frozen=True)
class HistogramSnapshot:
    """Per-bucket (not cumulative) counts, one more than `bounds` (+Inf), their sum."""

    bounds: tuple[float, ...]
    buckets: tuple[int, ...]
    total: float
    count: int


def bucket_index(name: str, value: float) -> int:
    return bisect.bisect_left(HISTOGRAMS[name], value)


class HotStore(ABC):
    """Shared state of one embedq cluster (or of one embedded process)."""

    remote = False  # True: every call is a network round trip (Redis)

    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()

    # --- vectors and failures
    @abstractmethod
    def get_vectors(self, fps: list[str]) -> list[bytes | None]:
        """One round trip (MGET) for the whole list."""

    @abstractmethod
    def put_vectors(self, vectors: dict[str, bytes], ttl_s: int) -> None: ...

    @abstractmethod
    def get_failures(self, fps: list[str]) -> list[dict[str, str] | None]: ...

    @abstractmethod
    def put_failures(self, failures: dict[str, dict[str, str]], ttl_s: int) -> None: ...

    def get_outcomes(self, fps: list[str]) -> list[tuple[bytes | None, dict[str, str] | None]]:
        """(vector, failure) per fingerprint; Redis answers both in one MGET."""
        return list(zip(self.get_vectors(fps), self.get_failures(fps), strict=True))

    # --- claims and leases: SET NX PX
    @abstractmethod
    def acquire(self, names: list[str], owner: str, ttl_ms: int) -> list[bool]:
        """Set each key to `owner` if absent; True where this call won it."""

    def acquire_clearing(self, names: list[str], clear: list[str], owner: str,
                         ttl_ms: int) -> list[bool]:
        """`acquire`, and for each key won, delete the key at the same index of `clear`
        (a claim won clears the failure an earlier computation left). Redis does both in
        one round trip; this default calls the methods one by one."""
        won = self.acquire(names, owner, ttl_ms)
        self.release([c for c, ok in zip(clear, won, strict=True) if ok])
        return won

    @abstractmethod
    def acquire_unless(self, names: list[str], present: list[str], owner: str,
                       ttl_ms: int, counted: list[str] | None = None
                       ) -> list[bytes | int | None]:
        """Per index, atomically: the value at `present[i]` when it exists (nothing is
        acquired); else, where this call won `names[i]` (`acquire`), the integer at
        `counted[i]` (0 when absent, or without `counted`); else None (held by another).
        A run lease is taken this way unless the vector is already stored: whoever
        computed it wrote the vector before releasing its lease, so a lease won here is
        never a second computation; the attempt count read with it is what earlier runs
        of the text left (no other run moves it while the lease is held)."""

    @abstractmethod
    def holders(self, names: list[str]) -> list[str | None]: ...

    @abstractmethod
    def release(self, names: list[str], owner: str | None = None) -> None:
        """Delete keys (only those still held by `owner`, when given)."""

    @abstractmethod
    def extend(self, names: list[str], ttl_ms: int) -> None: ...

    @abstractmethod
    def add_attempts(self, fps: list[str], ttl_s: int) -> list[int]: ...

    @abstractmethod
    def clear_attempts(self, fps: list[str]) -> None: ...

    @abstractmethod
    def peek_attempts(self, fps: list[str]) -> list[int]: ...

    # --- interest: which callers still wait for a fingerprint
    @abstractmethod
    def want(self, wants: dict[str, list[str]], ttl_ms: int) -> None:
        """Register each caller's interest in its fingerprint (fingerprint -> caller ids)
        for `ttl_ms` from now, by the store's clock; a caller registered again keeps the
        later end. Interest past its end counts as withdrawn."""

    @abstractmethod
    def unwant(self, wants: dict[str, list[str]]) -> None:
        """Withdraw these callers' interest (fingerprint -> caller ids) before its end."""

    def acquire_wanted(self, names: list[str], owner: str, ttl_ms: int,
                       wants: dict[str, list[str]], want_ttl_ms: int,
                       clear: list[str] | None = None) -> list[bool]:
        """`want(wants, want_ttl_ms)`, then `acquire_clearing(names, clear, owner, ttl_ms)`
        (`acquire` when `clear` is None). Redis does it all in one command; interest is
        registered first, so a worker can never see the claim without the interest that
        came with it."""
        self.want(wants, want_ttl_ms)
        if clear is None:
            return self.acquire(names, owner, ttl_ms)
        return self.acquire_clearing(names, clear, owner, ttl_ms)

    @abstractmethod
    def drop_unwanted(self, owners: list[tuple[str, str]]) -> list[str]:
        """Of these (fingerprint, claim owner) pairs, the fingerprints no caller wants any
        more, each once. In the same atomic step each such fingerprint's claim is
        released where that owner still holds it, and the counter `abandoned` grows by
        the fingerprints returned."""

    # --- counters
    @abstractmethod
    def incr(self, counts: dict[str, int]) -> None: ...

    @abstractmethod
    def counters(self) -> dict[str, int]: ...

    @abstractmethod
    def observe(self, values: dict[str, float]) -> None:
        """Add one observation to each named histogram of HISTOGRAMS (one round trip)."""

    @abstractmethod
    def histograms(self) -> dict[str, HistogramSnapshot]: ...

    # --- a finished batch
    def record_batch(self, batch: BatchRecord) -> None:
        """Everything a written batch tells the hot tier, in this order: vectors, attempt
        counters cleared, claims released, "done" published, counters, histograms.
        Redis does it in one round trip; this default calls the methods one by one."""
        for vectors, ttl_s in batch.vectors:
            self.put_vectors(vectors, ttl_s)
        self.clear_attempts(batch.clear_attempts)
        self.release(batch.release)
        self.publish_done(batch.done)
        self.incr(batch.counts)
        self.observe(batch.observations)

    # --- liveness
    @abstractmethod
    def heartbeat(self, worker_id: str, info: dict[str, object], ttl_s: int) -> None: ...

    @abstractmethod
    def live_workers(self) -> dict[str, dict[str, object]]: ...

    @abstractmethod
    def ping(self) -> None: ...

    # --- notifications
    @abstractmethod
    def publish_done(self, fps: list[str]) -> None:
        """Tell every process that these fingerprints are finished (vector or failure)."""

    def subscribe(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)
        self._start_listening()

    def _start_listening(self) -> None:  # noqa: B027 - optional hook
        """Start delivering notifications to listeners (Redis: a pub/sub thread)."""

    def _dispatch(self, fps: list[str]) -> None:
        for listener in list(self._listeners):
            listener(fps)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections and threads."""


@dataclass
class BatchRecord:
    """What `HotStore.record_batch` writes for one finished batch."""

    vectors: list[tuple[dict[str, bytes], int]]  # (fingerprint -> vector, ttl seconds)
    clear_attempts: list[str]
    release: list[str]  # claim keys
    done: list[str]
    counts: dict[str, int]
    observations: dict[str, float]


class MemoryHotStore(HotStore):
    """All of HotStore inside one process, with the same semantics as Redis.

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

    def get_vectors(self, fps: list[str]) -> list[bytes | None]:
        with self._mutex:
            return [self._get(keys.vector(fp)) for fp in fps]  # type: ignore[misc]

    def put_vectors(self, vectors: dict[str, bytes], ttl_s: int) -> None:
        with self._mutex:
            for fp, blob in vectors.items():
                self._set(keys.vector(fp), blob, ttl_s)

    def get_failures(self, fps: list[str]) -> list[dict[str, str] | None]:
        with self._mutex:
            return [self._get(keys.failure(fp)) for fp in fps]  # type: ignore[misc]

    def put_failures(self, failures: dict[str, dict[str, str]], ttl_s: int) -> None:
        with self._mutex:
            for fp, info in failures.items():
                self._set(keys.failure(fp), dict(info), ttl_s)

    def acquire(self, names: list[str], owner: str, ttl_ms: int) -> list[bool]:
        won = []
        with self._mutex:
            for name in names:
                if self._get(name) is None:
                    self._set(name, owner, ttl_ms / 1000)
                    won.append(True)
                else:
                    won.append(False)
        return won

    def acquire_unless(self, names: list[str], present: list[str], owner: str,
                       ttl_ms: int, counted: list[str] | None = None
                       ) -> list[bytes | int | None]:
        check_unless(names, present, counted)
        out: list[bytes | int | None] = []
        with self._mutex:
            for i, (name, there) in enumerate(zip(names, present, strict=True)):
                value = self._get(there)
                if value is not None:
                    out.append(value)  # type: ignore[arg-type]
                elif self._get(name) is None:
                    self._set(name, owner, ttl_ms / 1000)
                    out.append(int(self._get(counted[i]) or 0)  # type: ignore[call-overload]
                               if counted is not None else 0)
                else:
                    out.append(None)
        return out

    def holders(self, names: list[str]) -> list[str | None]:
        with self._mutex:
            return [self._get(n) for n in names]  # type: ignore[misc]

    def release(self, names: list[str], owner: str | None = None) -> None:
        with self._mutex:
            for name in names:
                if owner is None or self._get(name) == owner:
                    self._data.pop(name, None)

    def extend(self, names: list[str], ttl_ms: int) -> None:
        with self._mutex:
            for name in names:
                value = self._get(name)
                if value is not None:
                    self._set(name, value, ttl_ms / 1000)

    def add_attempts(self, fps: list[str], ttl_s: int) -> list[int]:
        out = []
        with self._mutex:
            for fp in fps:
                n = int(self._get(keys.attempts(fp)) or 0) + 1  # type: ignore[call-overload]
                self._set(keys.attempts(fp), n, ttl_s)
                out.append(n)
        return out

    def clear_attempts(self, fps: list[str]) -> None:
        with self._mutex:
            for fp in fps:
                self._data.pop(keys.attempts(fp), None)

    def peek_attempts(self, fps: list[str]) -> list[int]:
        with self._mutex:
            return [int(self._get(keys.attempts(fp)) or 0) for fp in fps]  # type: ignore[call-overload]

    def want(self, wants: dict[str, list[str]], ttl_ms: int) -> None:
        with self._mutex:
            now = time.monotonic()
            until = now + ttl_ms / 1000
            for fp, callers in wants.items():
                held = self._interest(fp, now)
                for caller in callers:
                    held[caller] = max(held.get(caller, until), until)
                if held:
                    self._set(keys.interest(fp), held, max(held.values()) - now)

    def unwant(self, wants: dict[str, list[str]]) -> None:
        with self._mutex:
            now = time.monotonic()
            for fp, callers in wants.items():
                held = self._interest(fp, now)
                for caller in callers:
                    held.pop(caller, None)
                if held:
                    self._set(keys.interest(fp), held, max(held.values()) - now)
                else:
                    self._data.pop(keys.interest(fp), None)

    def drop_unwanted(self, owners: list[tuple[str, str]]) -> list[str]:
        dropped: list[str] = []
        with self._mutex:
            now = time.monotonic()
            for fp, owner in owners:
                if self._interest(fp, now):
                    continue
                if self._get(keys.claim(fp)) == owner:
                    self._data.pop(keys.claim(fp), None)
                if fp not in dropped:
                    dropped.append(fp)
            if dropped:
                self._stats["abandoned"] = self._stats.get("abandoned", 0) + len(dropped)
        return dropped

    def _interest(self, fp: str, now: float) -> dict[str, float]:
        """The callers whose interest in `fp` has not ended (a copy; the lock is held)."""
        held: dict[str, float] = self._get(keys.interest(fp)) or {}  # type: ignore[assignment]
        return {caller: until for caller, until in held.items() if until > now}

    def incr(self, counts: dict[str, int]) -> None:
        with self._mutex:
            for name, n in counts.items():
                if n:
                    self._stats[name] = self._stats.get(name, 0) + n

    def counters(self) -> dict[str, int]:
        with self._mutex:
            return {name: self._stats.get(name, 0) for name in (*COUNTERS, *self._stats)}

    def observe(self, values: dict[str, float]) -> None:
        with self._mutex:
            for name, value in values.items():
                buckets, total, count = self._hists.get(
                    name, ([0] * (len(HISTOGRAMS[name]) + 1), 0.0, 0)
                )
                buckets[bucket_index(name, value)] += 1
                self._hists[name] = (buckets, total + value, count + 1)

    def histograms(self) -> dict[str, HistogramSnapshot]:
        with self._mutex:
            return {
                name: HistogramSnapshot(HISTOGRAMS[name], tuple(b), total, count)
                for name, (b, total, count) in self._hists.items()
            }

    def heartbeat(self, worker_id: str, info: dict[str, object], ttl_s: int) -> None:
        with self._mutex:
            self._set(f"{keys.WORKERS}:{worker_id}", dict(info), ttl_s)

    def live_workers(self) -> dict[str, dict[str, object]]:
        with self._mutex:
            prefix = f"{keys.WORKERS}:"
            out = {}
            for key in list(self._data):
                if key.startswith(prefix):
                    value = self._get(key)
                    if value is not None:
                        out[key[len(prefix):]] = value
            return out  # type: ignore[return-value]

    def ping(self) -> None:
        return None

    def publish_done(self, fps: list[str]) -> None:
        self._dispatch(list(fps))


def check_unless(names: list[str], present: list[str], counted: list[str] | None) -> None:
    """`acquire_unless`'s arguments: one key to look at, and one counter if any, per key."""
    if len(present) != len(names) or (counted is not None and len(counted) != len(names)):
        raise ValueError("acquire_unless needs one key to look at (and one counter, when "
                         "counted) per key to acquire")


def encode_failure(error: BaseException) -> dict[str, str]:
    return {"type": type(error).__name__, "message": str(error)}


def dumps(items: Iterable[str]) -> str:
    return json.dumps(list(items), separators=(",", ":"))
