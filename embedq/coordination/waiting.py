"""Waiting for outcomes: until each fingerprint has one, or its holder is gone, or a
deadline.

Every wait follows one of three `WaitPolicy`s:

- `REQUEST` (a service call waits for the claims it won or joined): orphans are read every
  second and looked for in the durable store; a store outage is ridden out until the
  deadline; the call's `RequestGroup` wakes the wait when a request leaves, and what no
  request still here wants ends its wait at once;
- `REDELIVERY` (a delivery waits for another execution's run lease): frequent checks, so
  a lease whose runner died is taken over quickly; an outage is raised (the task retries);
- `CHUNK` (a job's chunk waits for the claims others hold): no deadline, orphans looked
  for in the durable store.

A wait never takes orphans over itself: it returns them (`Waited.orphans`), and its
caller claims or leases them and waits again. Each process has one `Waiting` per hot
store: its "done" subscription (`Waiters`) cuts the polls short.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from embedq.coordination.interest import RequestGroup
from embedq.coordination.outcomes import read_outcomes
from embedq.coordination.store import Hold, HotStore
from embedq.coordination.waiters import Waiters
from embedq.errors import EmbedqError, Unavailable
from embedq.models.vectors import VectorStore

log = logging.getLogger("embedq.coordination")


@dataclass(frozen=True)
class WaitPolicy:
    """How a wait reads the stores: whose hold vanishing makes an orphan, how often it
    polls and reads the holders, whether an orphan's vector may be in the durable store,
    and whether a store outage is waited out (until the deadline) or raised."""

    hold: Hold
    poll_s: float
    check_s: float
    durable: bool
    ride_out_outages: bool


REQUEST = WaitPolicy(Hold.CLAIM, poll_s=0.25, check_s=1.0, durable=True,
                     ride_out_outages=True)
REDELIVERY = WaitPolicy(Hold.LEASE, poll_s=0.05, check_s=0.0, durable=False,
                        ride_out_outages=False)
CHUNK = WaitPolicy(Hold.CLAIM, poll_s=0.1, check_s=0.0, durable=True,
                   ride_out_outages=False)


@dataclass
class Waited:
    """What a wait found: each fingerprint it was given is in exactly one of vectors,
    failures, orphans (no holder, no outcome: the caller's to take over) or pending (the
    deadline came, or no request still here wants it)."""

    vectors: dict[str, bytes] = field(default_factory=dict)
    failures: dict[str, EmbedqError] = field(default_factory=dict)
    orphans: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    outage: Unavailable | None = None  # the last store error, when the wait ended in one


class Waiting:
    """Waits on one hot store (and, for orphans, one durable store) for this process."""

    def __init__(self, hot: HotStore, durable: VectorStore | None = None, *,
                 eager: bool = True) -> None:
        """`eager`: hear "done" notifications from now on (a service); else from the
        first wait (a worker, which waits only on redeliveries and orphans)."""
        self.hot = hot
        self.durable = durable
        self.waiters = Waiters(hot, eager=eager)

    def wait(self, fps: list[str], policy: WaitPolicy, *, deadline: float | None = None,
             group: RequestGroup | None = None) -> Waited:
        """Wait for `fps` under `policy` until `deadline` (`time.monotonic()`; None: no
        deadline). With `group`, its departures wake the wait, their interest is
        withdrawn, and what no request still here wants leaves the wait (in `pending`).
        Returns as soon as any orphan is found."""
        out = Waited()
        pending = list(dict.fromkeys(fps))
        given_up: list[str] = []
        event = group.wake if group is not None else threading.Event()
        self.waiters.register(pending, event)
        next_check = time.monotonic() + policy.check_s
        try:
            while pending:
                event.clear()
                if group is not None:
                    pending = _wanted_still(self.hot, group, pending, given_up)
                    if not pending:
                        break
                try:
                    vectors, failures, pending = read_outcomes(self.hot, pending)
                    out.vectors.update(vectors)
                    out.failures.update(failures)
                    if pending and time.monotonic() >= next_check:
                        pending = self._check_holders(pending, policy, out)
                        next_check = time.monotonic() + policy.check_s
                        if out.orphans:
                            break
                    out.outage = None
                except Unavailable as exc:
                    if not policy.ride_out_outages:
                        raise
                    if out.outage is None:
                        log.warning("waiting through an outage: %s", exc)
                    out.outage = exc
                    next_check = time.monotonic()
                if not pending or not _sleep(event, policy.poll_s, deadline):
                    break
        finally:
            self.waiters.unregister(fps, event)
        out.pending = pending + given_up
        return out

    def _check_holders(self, pending: list[str], policy: WaitPolicy, out: Waited
                       ) -> list[str]:
        """Move the fingerprints nobody holds to out.orphans, unless an outcome (hot, or
        durable where the policy says) turns up for them; return the rest."""
        held = self.hot.holders(policy.hold, pending)
        orphans = [fp for fp, h in zip(pending, held, strict=True) if h is None]
        if not orphans:
            return pending
        # An outcome may have landed between the read and the holder check.
        vectors, failures, orphans = read_outcomes(self.hot, orphans)
        out.vectors.update(vectors)
        out.failures.update(failures)
        if orphans and policy.durable and self.durable is not None:
            stored = self.durable.get_many(orphans)
            out.vectors.update(stored)
            orphans = [fp for fp in orphans if fp not in stored]
        out.orphans.extend(orphans)
        done = set(out.vectors) | set(out.failures) | set(out.orphans)
        return [fp for fp in pending if fp not in done]


def _wanted_still(hot: HotStore, group: RequestGroup, pending: list[str],
                  given_up: list[str]) -> list[str]:
    wanted = group.unwant_departed(hot, pending)
    if len(wanted) == len(pending):
        return pending
    still = set(wanted)
    given_up += [fp for fp in pending if fp not in still]
    return [fp for fp in pending if fp in still]


def _sleep(event: threading.Event, poll_s: float, deadline: float | None) -> bool:
    """Sleep until `event` or the next poll; False when the deadline has passed."""
    now = time.monotonic()
    if deadline is not None and now >= deadline:
        return False
    event.wait(poll_s if deadline is None else min(poll_s, max(0.0, deadline - now)))
    return True
