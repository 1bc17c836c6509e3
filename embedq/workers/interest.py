"""The last check before a batch encodes: is anyone still waiting for its texts?

An online message names the claim owner of the call that queued it, whose callers
registered their interest with the claim (`HotStore.claim(..., interest=)`). Between queueing
and encoding every caller of a text may have gone (timed out, or its HTTP client
disconnected); such a text costs no forward pass: it is left out of the batch, its claim
is released (so whoever wants it later claims and computes it as usual) and it is counted
as `abandoned`. Nothing is written for it.

A text is always encoded when any item for it came without a ticket: a job's chunk (which
claims for itself and waits for what it wants), or a message from a producer that does
not register interest; and when a request in this process still waits for it (local
encoding, `Ticket.present`): the check then costs no round trip. A store error encodes
the whole batch: the check only saves work.
"""

from __future__ import annotations

import logging

from embedq.coordination.store import HotStore
from embedq.errors import Abandoned, Unavailable
from embedq.workers.items import Item

log = logging.getLogger("embedq.worker")


class DropUnwanted:
    """The batcher's `keep` hook: one round trip per batch that holds online work."""

    def __init__(self, hot: HotStore) -> None:
        self.hot = hot

    def __call__(self, items: list[Item]) -> list[Item]:
        always = {i.fp for i in items if i.ticket is None or i.ticket.present()}
        owners = sorted({(i.fp, i.ticket.owner) for i in items
                         if i.ticket is not None and i.fp not in always})
        if not owners:
            return items
        try:
            dropped = set(self.hot.drop_unwanted(owners))
        except Unavailable as exc:
            log.warning("interest check failed (%s); encoding the whole batch", exc)
            return items
        if not dropped:
            return items
        error = Abandoned("every caller of this text went away before it was encoded")
        for item in items:
            if item.fp in dropped:
                item.future.set_exception(error)
        log.info("abandoned %d texts nobody waits for any more (first %s)",
                 len(dropped), min(dropped)[:12])
        return [i for i in items if i.fp not in dropped]
