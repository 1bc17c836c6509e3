"""The hot store's interface: intents about fingerprints, answered with small records.

The hot store is the shared state of one embedq cluster (Redis) or of one embedded
process (memory): hot copies of vectors, claims and run leases, interest, outcomes,
counters and worker heartbeats, and a "done" notification per finished fingerprint.
`MemoryHotStore` and `RedisHotStore` implement it, and the same tests run on both.

Its users speak in fingerprints: key names, scripts and round trips stay inside each store
(the Redis store does each call in one round trip: one command, a pipeline or one Lua
script). Interest is registered with a claim (`claim(..., interest=)`), withdrawn with
`unwant`, and read by `drop_unwanted` just before a batch encodes.
"""

from __future__ import annotations

import bisect
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

Listener = Callable[[list[str]], None]
Failure = dict[str, str]  # the stored form of a failure: {"type", "message"}

COUNTERS = (
    "requests", "texts", "cache_hits", "coalesced", "submitted", "encoded", "batches",
    "failed", "dead_lettered", "upstream_calls", "upstream_tokens", "tokens_saved",
    "calls_saved", "lookups", "refused", "abandoned",
)

# Cluster-wide histograms: name -> upper bounds of the buckets (a last +Inf bucket is
# implied). Workers observe them with each batch; any process (/metrics) reads them back.
HISTOGRAMS: dict[str, tuple[float, ...]] = {
    "batch_texts": (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
    "batch_tokens": (64, 256, 1024, 2048, 4096, 8192, 16384, 32768, 65536),
    "encode_seconds": (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
}


def bucket_index(name: str, value: float) -> int:
    return bisect.bisect_left(HISTOGRAMS[name], value)


def served_revisions(info: dict[str, object]) -> list[str]:
    """The revisions a worker's heartbeat (`HotStore.live_workers`) says it serves, one
    per tier (a heartbeat of an older worker names one `revision`)."""
    revisions = info.get("revisions")
    if isinstance(revisions, list):
        return [str(r) for r in revisions]
    return [str(info.get("revision"))]


def consumes(info: dict[str, object], queue: str) -> bool:
    """Whether a worker's heartbeat says it consumes `queue`: it names it among its
    `queues`, or names none (it consumes the configured online and bulk queues)."""
    queues = info.get("queues")
    return not isinstance(queues, list) or queue in queues


def serving(workers: dict[str, dict[str, object]], queue: str, model: str,
             revision: str) -> list[str] | None:
    """None when a live worker (`workers`: `HotStore.live_workers`) that consumes `queue`
    serves `model` at `revision`; else the model@revision pairs the queue's live workers
    serve (empty: no live worker consumes it)."""
    on_queue = [w for w in workers.values() if consumes(w, queue)]
    if any(w.get("model") == model and revision in served_revisions(w) for w in on_queue):
        return None
    return sorted({f"{w.get('model')}@{r}" for w in on_queue for r in served_revisions(w)})


class Hold(StrEnum):
    """What holds a fingerprint's computation: the claim of whoever queued it, or the run
    lease of the execution running it."""

    CLAIM = "claim"
    LEASE = "run"


@dataclass(frozen=True)
class Interest:
    """Which callers wait for which fingerprints (fingerprint -> caller ids), for
    `ttl_ms` from now by the store's clock. A caller registered again keeps the later end;
    interest past its end counts as withdrawn."""

    callers: dict[str, list[str]]
    ttl_ms: int


@dataclass(frozen=True)
class Claimed:
    """A claim call's answer, each list in the order given: `won` includes fingerprints
    the same owner held already (a redelivered chunk takes its own claims back)."""

    won: list[str]
    lost: list[str]


@dataclass(frozen=True)
class Leased:
    """A lease call's answer: the fingerprints leased, each with the attempt count earlier
    runs left; those whose vector the hot store had instead (nothing leased); the rest are
    leased by another execution."""

    won: dict[str, int]
    stored: dict[str, bytes]
    held: list[str]


@dataclass(frozen=True)
class Settled:
    """Each fingerprint asked about in exactly one of vectors, failures or pending."""

    vectors: dict[str, bytes]
    failures: dict[str, Failure]
    pending: list[str]


@dataclass
class BatchRecord:
    """Everything a finished batch (or any set of outcomes) tells the hot store, written
    in this order in one round trip: vectors, failures, attempt counts forgotten, claims
    freed, "done" published, counters, histograms. `wanted` vectors get a hot copy only
    where some caller's interest is registered (bulk work: nobody else reads them there;
    a job's waiters find them in the durable store)."""

    vectors: list[tuple[dict[str, bytes], int]] = field(default_factory=list)  # (fp->vector, ttl s)
    wanted: dict[str, bytes] = field(default_factory=dict)
    wanted_ttl_s: int = 300
    failures: dict[str, Failure] = field(default_factory=dict)
    failure_ttl_s: int = 300
    forget_attempts: list[str] = field(default_factory=list)
    free_claims: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    # One observation of each named histogram per dict (a record of several batches
    # carries one dict per batch).
    observations: list[dict[str, float]] = field(default_factory=list)


@dataclass(frozen=True)
class HistogramSnapshot:
    """Per-bucket (not cumulative) counts, one more than `bounds` (+Inf), their sum."""

    bounds: tuple[float, ...]
    buckets: tuple[int, ...]
    total: float
    count: int


class HotStore(ABC):
    """Shared state of one embedq cluster (or of one embedded process)."""

    remote = False  # True: every call is a network round trip (Redis)

    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()

    # --- hot vectors and outcomes
    @abstractmethod
    def vectors(self, fps: list[str]) -> list[bytes | None]:
        """The hot copy of each fingerprint's vector, or None."""

    def put_vectors(self, vectors: dict[str, bytes], ttl_s: int) -> None:
        """Hot copies of `vectors`: a batch record with nothing else in it."""
        if vectors:
            self.record_batch(BatchRecord(vectors=[(vectors, ttl_s)]))

    @abstractmethod
    def settled(self, fps: list[str]) -> Settled:
        """Which of `fps` have an outcome (a vector or a failure) and which are pending."""

    @abstractmethod
    def record_batch(self, batch: BatchRecord) -> None: ...

    # --- claims and run leases
    @abstractmethod
    def claim(self, fps: list[str], owner: str, ttl_ms: int,
              interest: Interest | None = None) -> Claimed:
        """Claim each fingerprint for `owner` where nobody holds it (or `owner` does: its
        ttl starts again), registering `interest` first in the same atomic step, so a
        worker never sees a claim without the interest that came with it. A claim won
        clears the failure an earlier computation left, so its waiters wait for the new
        outcome instead of reading the old error."""

    @abstractmethod
    def lease(self, fps: list[str], owner: str, ttl_ms: int) -> Leased:
        """Per fingerprint, atomically: its hot vector when there is one (nothing leased);
        else its run lease for `owner` if free, with its attempt count. A runner writes
        its vector before it releases its lease, so a lease won here is never a second
        computation; the count read with it is what earlier runs left (no other run moves
        it while the lease is held)."""

    @abstractmethod
    def holders(self, hold: Hold, fps: list[str]) -> list[str | None]:
        """Who holds each fingerprint's claim or lease (None: nobody)."""

    @abstractmethod
    def release(self, hold: Hold, fps: list[str], owner: str | None = None) -> None:
        """Free claims or leases (only those `owner` still holds, when given)."""

    @abstractmethod
    def extend_leases(self, fps: list[str], ttl_ms: int) -> None: ...

    # --- attempts: how often a fingerprint's encoding started (dead-letter counts)
    @abstractmethod
    def count_attempts(self, fps: list[str], ttl_s: int) -> list[int]:
        """Add one attempt to each; return the new counts."""

    @abstractmethod
    def forget_attempts(self, fps: list[str]) -> None: ...

    @abstractmethod
    def attempts(self, fps: list[str]) -> list[int]: ...

    # --- interest
    @abstractmethod
    def unwant(self, callers: dict[str, list[str]]) -> None:
        """Withdraw these callers' interest (fingerprint -> caller ids) before its end."""

    @abstractmethod
    def drop_unwanted(self, owners: list[tuple[str, str]]) -> list[str]:
        """Of these (fingerprint, claim owner) pairs, the fingerprints no caller wants any
        more, each once. In the same atomic step each such fingerprint's claim is freed
        where that owner still holds it, and the counter `abandoned` grows by the
        fingerprints returned."""

    # --- counters
    @abstractmethod
    def incr(self, counts: dict[str, int]) -> None: ...

    @abstractmethod
    def counters(self) -> dict[str, int]: ...

    @abstractmethod
    def histograms(self) -> dict[str, HistogramSnapshot]: ...

    # --- a running job's progress between chunk rows
    @abstractmethod
    def note_chunk_progress(self, job_id: str, chunk: int, done: int, ttl_s: int) -> None:
        """Items of a running chunk with a vector so far (the chunk row says it once the
        chunk is done); kept `ttl_s` after the job's last note."""

    @abstractmethod
    def chunk_progress(self, job_id: str) -> dict[int, int]:
        """What `note_chunk_progress` last said for each chunk of the job."""

    # --- hot keys
    @abstractmethod
    def publish_hot_keys(self, process_id: str,
                         top: dict[str, list[tuple[str, float]]]) -> None:
        """Record one process's heaviest keys per kind (`hot_keys.HotKeys.top`),
        replacing what it published before; it counts for PUBLISH_TTL_S."""

    @abstractmethod
    def hot_keys(self) -> dict[str, list[tuple[str, float]]]:
        """The cluster's hottest keys per kind: what live processes published, summed
        (`hot_keys.merge`), largest first."""

    # --- liveness
    @abstractmethod
    def heartbeat(self, worker_id: str, info: dict[str, object], ttl_s: int) -> None: ...

    @abstractmethod
    def forget_worker(self, worker_id: str) -> None:
        """Drop a stopping worker's heartbeat at once, so readiness and the benches stop
        counting it now rather than when its heartbeat would have expired."""

    @abstractmethod
    def live_workers(self) -> dict[str, dict[str, object]]: ...

    @abstractmethod
    def ping(self) -> None: ...

    # --- notifications
    def subscribe(self, listener: Listener, fps: list[str] | None = None) -> None:
        """Call `listener(fps)` with the fingerprints of every batch announced as done
        (in parts on a Redis Cluster: one per bucket of hash slots). Given `fps`, only
        their buckets' announcements are due (a Redis Cluster has a sharded channel per
        bucket; the other stores deliver all); a listener subscribed again adds the
        buckets of the new `fps`."""
        with self._lock:
            if listener not in self._listeners:
                self._listeners.append(listener)
        self._start_listening(fps)

    def _start_listening(self, fps: list[str] | None) -> None:  # noqa: B027 - optional hook
        """Start delivering notifications to listeners (Redis: a pub/sub thread), of
        every bucket (`fps` None) or at least of those of `fps`."""

    def _dispatch(self, fps: list[str]) -> None:
        for listener in list(self._listeners):
            listener(fps)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections and threads."""


def encode_failure(error: BaseException) -> Failure:
    """The stored form of a failure: its type name and message."""
    return {"type": type(error).__name__, "message": str(error)}


def failures_of(errors: dict[str, BaseException]) -> dict[str, Failure]:
    return {fp: encode_failure(e) for fp, e in errors.items()}


def check_interest(interest: Interest | None) -> None:
    if interest is not None and interest.ttl_ms < 1:
        raise ValueError("interest needs a ttl of at least 1 ms")


__all__ = [
    "COUNTERS", "HISTOGRAMS", "BatchRecord", "Claimed", "Failure",
    "HistogramSnapshot", "Hold", "HotStore", "Interest", "Leased", "Settled",
    "bucket_index", "encode_failure", "failures_of",
]
