"""Fencing: run leases, attempt counts and dead-lettering, for one worker process.

- A run lease per fingerprint fences concurrent deliveries of the same work (a
  redelivery after the visibility timeout while the first copy still runs): the copy that
  loses the lease waits for the winner's outcome and takes over only if the winner died.
  Leases are refreshed while their batch encodes, so a lease outlives its runner by at
  most `run_lease_ms`, however long the batch takes.
- Every encode attempt is counted per fingerprint before the model runs. A count that
  survives (the process died mid-batch) marks the text a suspect, encoded alone next
  time; at `max_attempts` it is dead-lettered and its waiters fail with PoisonText.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from embedq import stages
from embedq.config import Settings
from embedq.coordination.outcomes import announce, publish_failures
from embedq.coordination.store import Hold, HotStore, Leased
from embedq.coordination.waiting import REDELIVERY, Waiting
from embedq.errors import EmbedqError, PoisonText

log = logging.getLogger("embedq.worker")

ATTEMPTS_TTL_S = 3600


@dataclass
class Ran:
    """What became of a set of texts run under leases: those that got a vector (computed
    here, by another execution meanwhile, or found stored), and of those the ones found
    stored rather than computed here."""

    done: set[str] = field(default_factory=set)
    reused: set[str] = field(default_factory=set)


class Fencing:
    def __init__(self, hot: HotStore, settings: Settings, owner: str,
                 waiting: Waiting | None = None) -> None:
        self.hot = hot
        self.waiting = waiting if waiting is not None else Waiting(hot)
        self.settings = settings
        self.owner = owner
        self._leased: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        threading.Thread(target=self._keep_leases, name="embedq-leases", daemon=True).start()

    def close(self) -> None:
        self._stop.set()

    # --- attempts and dead letters
    @stages.timed("fencing")
    def triage(self, attempts: dict[str, int]) -> tuple[dict[str, BaseException], set[str]]:
        """(dead-lettered failures, suspects) among leased fingerprints, from the attempt
        counts read with their leases (`lease`); the dead-lettered are published."""
        dead: dict[str, BaseException] = {
            fp: PoisonText(
                f"the worker process died {n} times while encoding this text; it is "
                "dead-lettered and will not be retried. Check the text or the model", fp)
            for fp, n in attempts.items() if n >= self.settings.queue.max_attempts
        }
        if dead:
            publish_failures(self.hot, dead, self.settings.worker.failure_ttl_s,
                             {"dead_lettered": len(dead)})
        suspects = {fp for fp, n in attempts.items() if n > 0 and fp not in dead}
        return dead, suspects

    @stages.timed("fencing")
    def count_attempt(self, fps: list[str]) -> None:
        """The batcher's hook, called just before the model runs on `fps`."""
        self.hot.count_attempts(fps, ATTEMPTS_TTL_S)

    def forget_attempts(self, fps: list[str]) -> None:
        """Infrastructure failed, not the text: the attempt does not count."""
        self.hot.forget_attempts(fps)

    # --- leases
    def run_leased(self, pairs: dict[str, str],
                   encode: Callable[[dict[str, str], dict[str, int]], Ran]) -> Ran:
        """Encode `pairs` under run leases; wait out fingerprints another execution is
        running, and take over those whose runner vanished. A fingerprint whose vector is
        in the hot store when its lease is asked for is not leased: it counts as reused.
        `encode(leased, attempts)` (the leased pairs, their attempt counts) says which got
        a vector and which of those were found stored; so does this, for all `pairs`."""
        out = Ran()
        pending = dict(pairs)
        deadline = time.monotonic() + self.settings.queue.visibility_timeout_s
        while pending:
            leased = self.lease(list(pending))
            out.done |= set(leased.stored)
            out.reused |= set(leased.stored)
            if leased.won:
                try:
                    ran = encode({fp: pending[fp] for fp in leased.won}, leased.won)
                    out.done |= ran.done
                    out.reused |= ran.reused
                finally:
                    self.unlease(list(leased.won))
            for fp in [*leased.won, *leased.stored]:
                del pending[fp]
            if not leased.held:
                break
            got = self.waiting.wait(leased.held, REDELIVERY, deadline=deadline)
            out.done |= set(got.vectors)
            # Orphans (their runner died) and work still running go round again: the
            # orphans are leased here. At the deadline what still runs is left to it.
            settled = set(got.vectors) | set(got.failures)
            if time.monotonic() >= deadline:
                settled |= set(got.pending)
            for fp in settled:
                del pending[fp]
        return out

    @stages.timed("fencing")
    def lease(self, fps: list[str]) -> Leased:
        """Take the run leases of `fps` that no one else holds and whose vector is not in
        the hot store (kept fresh until `unlease`), in one atomic step: a runner writes
        the vector before it releases the lease, so a lease taken here is never a second
        computation. Those leased come with their attempt counts for `triage`; for the
        vectors found instead, claims are freed and waiters woken (the hot store has
        them already)."""
        leased = self.hot.lease(fps, self.owner, self.settings.queue.run_lease_ms)
        announce(self.hot, list(leased.stored))
        with self._lock:
            self._leased.update(leased.won)
        return leased

    @stages.timed("fencing")
    def unlease(self, fps: list[str]) -> None:
        with self._lock:
            self._leased.difference_update(fps)
        self.hot.release(Hold.LEASE, fps, self.owner)

    def _keep_leases(self) -> None:
        interval_s = self.settings.queue.run_lease_ms / 3000
        while not self._stop.wait(interval_s):
            with self._lock:
                fps = list(self._leased)
            try:
                self.hot.extend_leases(fps, self.settings.queue.run_lease_ms)
            except EmbedqError as exc:
                log.warning("lease refresh failed: %s", exc)
