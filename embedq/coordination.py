"""Coordination between processes: claims, run leases, outcomes, and waiting for them.

Every process that computes or waits for a vector goes through this module:

- a **claim** (`claim:{fp}`, SET NX PX) is held by whoever queued a fingerprint's
  computation; whoever loses it joins the computation in flight. Winning a claim clears
  the failure an earlier computation left, so a new computation is never answered with
  an old error;
- a **run lease** (`run:{fp}`) is held by the worker executing a fingerprint, so a
  redelivered copy of the same work waits instead of computing again;
- an **outcome** is a vector (float32 bytes under `vec:{fp}`) or a failure (JSON
  `{"type", "message"}` under `err:{fp}`), written by `publish_vectors` /
  `publish_failures` and read back by `read_outcomes` as bytes or a typed `EmbedqError`;
- `await_outcomes` waits until each fingerprint has an outcome, and hands back those
  whose holder (claim or lease) vanished without one, so the caller can take them over;
- **interest** (`want:{fp}`) says which callers still wait for a fingerprint, each until
  its deadline: registered with the claim (`claim_wanted`), withdrawn when a caller goes
  away (`Callers`), read by a worker just before it encodes (`drop_unwanted`). Work
  nobody waits for any more is not encoded (counted as `abandoned`).

Key names live in `embedq.cache.keys`; the stores' operations in `embedq.cache.hot`.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from embedq.cache import HotStore, keys
from embedq.cache.waiters import Waiters
from embedq.errors import (
    EmbeddingFailed,
    EmbedqError,
    InvalidVector,
    PoisonText,
    Unavailable,
    UpstreamError,
)
from embedq.models.vectors import VectorStore

log = logging.getLogger("embedq.coordination")

Failure = dict[str, str]

_FAILURE_TYPES: dict[str, type[EmbedqError]] = {
    "EmbeddingFailed": EmbeddingFailed,
    "InvalidVector": InvalidVector,
    "PoisonText": PoisonText,
    "UpstreamError": UpstreamError,
}


# --- claims
def claim(hot: HotStore, fps: list[str], owner: str, ttl_ms: int) -> tuple[list[str], list[str]]:
    """Return (won, lost) fingerprints, in the order given.

    A won claim starts a new computation: the failure an earlier one left (kept
    `failure_ttl_s` so that computation's waiters learn it) is cleared, so this one's
    waiters wait for the new outcome instead of reading the old error.
    """
    results = hot.acquire_clearing([keys.claim(fp) for fp in fps],
                                   [keys.failure(fp) for fp in fps], owner, ttl_ms)
    won = [fp for fp, ok in zip(fps, results, strict=True) if ok]
    lost = [fp for fp, ok in zip(fps, results, strict=True) if not ok]
    return won, lost


def claim_holders(hot: HotStore, fps: list[str]) -> list[str | None]:
    return hot.holders([keys.claim(fp) for fp in fps])


def orphaned(hot: HotStore, fps: list[str]) -> list[str]:
    """Fingerprints nobody holds a claim on any more."""
    return [fp for fp, h in zip(fps, claim_holders(hot, fps), strict=True) if h is None]


def release(hot: HotStore, fps: list[str], owner: str | None = None) -> None:
    hot.release([keys.claim(fp) for fp in fps], owner)


# --- run leases
def lease_unless_stored(hot: HotStore, fps: list[str], owner: str, ttl_ms: int
                        ) -> tuple[dict[str, int], dict[str, bytes]]:
    """(the fingerprints whose run lease this call took, each with its attempt count;
    vectors already in the hot tier), in one atomic round trip: a fingerprint computed
    and released between a caller's lookup and its lease is found here, not computed
    again, and the count read under the lease is what earlier runs left, not one that
    another execution still running the text has just raised."""
    got = hot.acquire_unless([keys.run_lease(fp) for fp in fps],
                             [keys.vector(fp) for fp in fps], owner, ttl_ms,
                             counted=[keys.attempts(fp) for fp in fps])
    won = {fp: g for fp, g in zip(fps, got, strict=True) if isinstance(g, int)}
    stored = {fp: g for fp, g in zip(fps, got, strict=True) if isinstance(g, bytes)}
    return won, stored


def extend_leases(hot: HotStore, fps: list[str], ttl_ms: int) -> None:
    hot.extend([keys.run_lease(fp) for fp in fps], ttl_ms)


def release_leases(hot: HotStore, fps: list[str], owner: str) -> None:
    hot.release([keys.run_lease(fp) for fp in fps], owner)


# --- outcomes
def encode_failure(error: BaseException) -> Failure:
    """The stored form of a failure: its type name and message."""
    return {"type": type(error).__name__, "message": str(error)}


def decode_failure(info: Failure, fp: str) -> EmbedqError:
    """A stored failure as the error it was (EmbeddingFailed when the type is unknown)."""
    kind = _FAILURE_TYPES.get(info.get("type", ""), EmbeddingFailed)
    message = info.get("message", "embedding failed")
    if issubclass(kind, EmbeddingFailed):
        return kind(message, fp)
    return kind(message)


def describe(error: BaseException) -> str:
    """One line for a failed item (jobs store it per item): `Type: message`."""
    return f"{type(error).__name__}: {error}"


def publish_vectors(hot: HotStore, vectors: dict[str, bytes], ttl_s: int) -> None:
    """Vectors found or computed outside a batch write: hot copy, claims freed, waiters
    woken. (A written batch does the same in one round trip: `HotStore.record_batch`.)"""
    hot.put_vectors(vectors, ttl_s)
    announce(hot, list(vectors))


def announce(hot: HotStore, fps: list[str]) -> None:
    """Fingerprints whose vectors the hot tier already holds: claims freed, waiters woken."""
    hot.release([keys.claim(fp) for fp in fps])
    hot.publish_done(sorted(fps))


def publish_failures(hot: HotStore, failures: dict[str, BaseException], ttl_s: int) -> None:
    """Failures, kept `ttl_s` so every waiter learns them; claims freed, waiters woken."""
    hot.put_failures({fp: encode_failure(e) for fp, e in failures.items()}, ttl_s)
    hot.release([keys.claim(fp) for fp in failures])
    hot.publish_done(sorted(failures))
    hot.incr({"failed": len(failures)})
    for fp, e in failures.items():
        log.warning("failed fp=%s: %s", fp[:12], e)


def read_outcomes(hot: HotStore, fps: list[str]
                  ) -> tuple[dict[str, bytes], dict[str, EmbedqError], list[str]]:
    """(vectors, failures, still pending) in one round trip."""
    vectors: dict[str, bytes] = {}
    failures: dict[str, EmbedqError] = {}
    pending: list[str] = []
    for fp, (vec, fail) in zip(fps, hot.get_outcomes(fps), strict=True):
        if vec is not None:
            vectors[fp] = vec
        elif fail is not None:
            failures[fp] = decode_failure(fail, fp)
        else:
            pending.append(fp)
    return vectors, failures, pending


# --- waiting
@dataclass
class Outcomes:
    """What `await_outcomes` found: each fingerprint it was given is in exactly one of
    vectors, failures, orphans (handed back to the caller) or pending (the deadline)."""

    vectors: dict[str, bytes] = field(default_factory=dict)
    failures: dict[str, EmbedqError] = field(default_factory=dict)
    orphans: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    outage: Unavailable | None = None  # the last store error, when the wait ended in one


Adopt = Callable[[list[str]], list[str]]


def await_outcomes(
    hot: HotStore,
    fps: list[str],
    *,
    deadline: float | None,
    holder: Callable[[str], str] = keys.claim,
    adopt: Adopt | None = None,
    durable: VectorStore | None = None,
    poll_s: float = 0.25,
    check_s: float = 0.0,
    wake: Waiters | None = None,
    ride_out_outages: bool = False,
    event: threading.Event | None = None,
    keep: Callable[[list[str]], list[str]] | None = None,
) -> Outcomes:
    """Wait until every fingerprint has an outcome, or its holder is gone, or `deadline`.

    `holder` names the key whose owner computes each fingerprint (a claim, or a run
    lease). Every `check_s` the holders are read; a fingerprint with neither holder nor
    outcome is an orphan: if `durable` has its vector that is its outcome, else
    `adopt(orphans)` decides — it returns the orphans the caller takes back (they end the
    wait, in `orphans`) and may re-queue the rest (they are awaited again). Without
    `adopt` every orphan is taken back. `wake` (the process's "done" subscription) cuts
    the poll short. With `ride_out_outages` a store error is retried until the deadline.
    `event` is what the wait sleeps on (another thread may set it to wake the wait);
    `keep(pending)`, called each time the wait wakes, returns the fingerprints still
    worth waiting for: the others end their wait at once, in `pending`.
    """
    out = Outcomes()
    pending = list(dict.fromkeys(fps))
    given_up: list[str] = []
    event = event if event is not None else threading.Event()
    if wake is not None:
        wake.register(pending, event)
    next_check = time.monotonic() + check_s
    try:
        while pending:
            event.clear()
            if keep is not None:
                pending = _kept(pending, keep, given_up)
                if not pending:
                    break
            try:
                vectors, failures, pending = read_outcomes(hot, pending)
                out.vectors.update(vectors)
                out.failures.update(failures)
                if pending and time.monotonic() >= next_check:
                    pending = _check_holders(hot, pending, holder, adopt, durable, out)
                    next_check = time.monotonic() + check_s
                    if out.orphans:
                        break
                out.outage = None
            except Unavailable as exc:
                if not ride_out_outages:
                    raise
                if out.outage is None:
                    log.warning("waiting through an outage: %s", exc)
                out.outage = exc
                next_check = time.monotonic()
            if not pending:
                break
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                break
            timeout = poll_s if deadline is None else min(poll_s, max(0.0, deadline - now))
            event.wait(timeout)
    finally:
        if wake is not None:
            wake.unregister(fps, event)
    out.pending = pending + given_up
    return out


def _kept(pending: list[str], keep: Callable[[list[str]], list[str]],
          given_up: list[str]) -> list[str]:
    kept = keep(pending)
    if len(kept) == len(pending):
        return pending
    still = set(kept)
    given_up += [fp for fp in pending if fp not in still]
    return [fp for fp in pending if fp in still]


def _check_holders(hot: HotStore, pending: list[str], holder: Callable[[str], str],
                   adopt: Adopt | None, durable: VectorStore | None,
                   out: Outcomes) -> list[str]:
    """Resolve orphans (stored, taken back, or re-queued by `adopt`); return the rest."""
    held = hot.holders([holder(fp) for fp in pending])
    orphans = [fp for fp, h in zip(pending, held, strict=True) if h is None]
    if not orphans:
        return pending
    # An outcome may have landed between the read and the holder check.
    vectors, failures, orphans = read_outcomes(hot, orphans)
    out.vectors.update(vectors)
    out.failures.update(failures)
    if orphans and durable is not None:
        stored = durable.get_many(orphans)
        out.vectors.update(stored)
        orphans = [fp for fp in orphans if fp not in stored]
    taken = (adopt(orphans) if adopt is not None else orphans) if orphans else []
    out.orphans.extend(taken)
    done = set(out.vectors) | set(out.failures) | set(out.orphans)
    return [fp for fp in pending if fp not in done]


# --- interest: who still waits for a fingerprint
class Callers:
    """The requests one service call answers (a coalesced group, or one caller), each
    owning a run of its inputs; which of them went away while the call waits; and the
    call's claim owner, which its queued messages name.

    The API calls `leave(k)` when request k's client disconnects: safe from any thread,
    no I/O, it wakes the call's wait (`wake`), whose own thread then withdraws request
    k's interest and stops waiting for what no request still here wants
    (`still_wanted`). A caller that timed out needs no withdrawal: its interest ends
    with its deadline (`bind`).
    """

    def __init__(self, sizes: list[int]) -> None:
        self.ids = [f"caller-{uuid.uuid4().hex[:16]}" for _ in sizes]
        self.owner = f"req-{uuid.uuid4().hex[:16]}"
        self.wake = threading.Event()
        self._of_input = [k for k, n in enumerate(sizes) for _ in range(n)]
        self._fps: list[str] = []
        self._deadline = 0.0
        self._gone: set[int] = set()
        self._unsettled: list[int] = []
        self._lock = threading.Lock()

    def bind(self, fps: list[str], deadline: float) -> None:
        """The call's fingerprints, one per input in input order, and its deadline
        (`time.monotonic()` seconds)."""
        if len(fps) != len(self._of_input):
            raise ValueError(f"{len(fps)} fingerprints for {len(self._of_input)} inputs")
        self._fps, self._deadline = list(fps), deadline

    def leave(self, k: int) -> None:
        with self._lock:
            if k not in self._gone:
                self._gone.add(k)
                self._unsettled.append(k)
        self.wake.set()

    def waiting(self) -> bool:
        """Every request of the call is still here (none left, the deadline not past), so
        each of its fingerprints is wanted, without asking the store. Safe from any
        thread, no I/O."""
        with self._lock:
            if self._gone:
                return False
        return bool(self._fps) and time.monotonic() < self._deadline

    def ttl_ms(self) -> int:
        """Milliseconds until the deadline: how long registered interest lives."""
        return max(1, int((self._deadline - time.monotonic()) * 1000))

    def wants(self, fps: list[str]) -> dict[str, list[str]]:
        """Of `fps`, each one's callers still here (fingerprint -> caller ids)."""
        return self._wants(set(fps), lambda k: k not in self._gone)

    def wanted(self, fps: list[str]) -> list[str]:
        """Those of `fps` some request still here wants, in order."""
        with self._lock:
            if not self._gone:
                return fps
        wants = self.wants(fps)
        return [fp for fp in fps if fp in wants]

    def departed(self) -> dict[str, list[str]]:
        """The interest of the requests that left since the last call, to withdraw."""
        with self._lock:
            left, self._unsettled = set(self._unsettled), []
        return self._wants(set(self._fps), left.__contains__) if left else {}

    def _wants(self, fps: set[str], keep: Callable[[int], bool]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        with self._lock:
            for fp, k in zip(self._fps, self._of_input, strict=True):
                if fp in fps and keep(k):
                    ids = out.setdefault(fp, [])
                    if self.ids[k] not in ids:
                        ids.append(self.ids[k])
        return out


def claim_wanted(hot: HotStore, fps: list[str], callers: Callers, ttl_ms: int
                 ) -> tuple[list[str], list[str]]:
    """`claim` by `callers.owner`, registering in the same command the interest of each
    caller still here in each fingerprint, won or lost, until the call's deadline."""
    results = hot.acquire_wanted([keys.claim(fp) for fp in fps], callers.owner, ttl_ms,
                                 callers.wants(fps), callers.ttl_ms(),
                                 clear=[keys.failure(fp) for fp in fps])
    won = [fp for fp, ok in zip(fps, results, strict=True) if ok]
    lost = [fp for fp, ok in zip(fps, results, strict=True) if not ok]
    return won, lost


def still_wanted(hot: HotStore, callers: Callers, fps: list[str]) -> list[str]:
    """Withdraw the interest of the requests that left since the last call; return those
    of `fps` some request still here wants (`await_outcomes`'s `keep`). A store error is
    logged, not raised: the interest still ends at the deadline."""
    gone = callers.departed()
    if gone:
        try:
            hot.unwant(gone)
        except Unavailable as exc:
            log.warning("could not withdraw the interest of departed callers: %s", exc)
    return callers.wanted(fps)


def drop_unwanted(hot: HotStore, owners: list[tuple[str, str]]) -> list[str]:
    """Of (fingerprint, claim owner) pairs about to be encoded, the fingerprints nobody
    waits for any more: their claims (where that owner still holds them) are released
    and they are counted as `abandoned`, in one round trip. Nothing is written for them:
    whoever wants one later claims and computes it as usual."""
    return hot.drop_unwanted(owners)
