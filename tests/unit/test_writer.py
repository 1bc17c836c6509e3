"""The batch writer: a whole batch refused is retried text by text, each text keeping
what its call knew (its ticket), so only the bad text fails and its caller in this
process still gets the good ones early."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedq.config import Settings
from embedq.coordination.executor import Ticket
from embedq.coordination.interest import RequestGroup
from embedq.coordination.memory import MemoryHotStore
from embedq.encoders.faulty import FaultyEncoder
from embedq.errors import InvalidVector
from embedq.fingerprint import EncodeSpec, fingerprint
from embedq.models import Database
from embedq.models.migrate import upgrade
from embedq.models.vectors import SQLiteVectors
from embedq.workers.batcher import Batcher
from embedq.workers.items import Item
from embedq.workers.writer import BatchWriter

SPEC = EncodeSpec("hashing", "hashing-v2")


def test_a_batch_refused_whole_is_retried_alone_with_each_ticket_kept(tmp_path: Path
                                                                     ) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    upgrade(url)
    db = Database(url)
    hot = MemoryHotStore()
    encoder = FaultyEncoder()
    batcher: Batcher | None = None

    def resubmit(retry: list[Item]) -> None:
        assert batcher is not None
        resubmitted.extend(retry)
        batcher.submit(retry)

    resubmitted: list[Item] = []
    writer = BatchWriter(hot, SQLiteVectors(db), Settings(), encoder, resubmit=resubmit)
    batcher = Batcher(encoder, writer, wait_ms=50)
    try:
        texts = ["a good text", "a text that breaks its batch [[wrongdim]]"]
        early: dict[str, bytes] = {}
        group = RequestGroup([2])
        ticket = Ticket("req-owner", group, answer=lambda fp, vec: early.__setitem__(fp, vec))
        work = [Item(fingerprint(SPEC, t), t, SPEC, ticket=ticket) for t in texts]
        batcher.submit(work)
        good = work[0].future.result(timeout=10)
        with pytest.raises(InvalidVector):
            work[1].future.result(timeout=10)
        assert [i.alone for i in resubmitted] == [True, True]
        assert all(i.ticket is ticket for i in resubmitted)
        assert early == {work[0].fp: good}  # handed over early, by the retry
        assert hot.settled([work[1].fp]).failures[work[1].fp]["type"] == "InvalidVector"
    finally:
        batcher.stop()
        db.dispose()
