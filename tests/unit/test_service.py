"""EmbeddingService in one process, in seconds: the same body on the in-process and the
Redis hot store, through both executors (the queue, with the embedded worker consuming
it, and this process). SQLite is the durable store; the faulty encoder's ledger counts
forward passes outside the service."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from embedq.config import Settings
from embedq.coordination.executor import Ticket
from embedq.coordination.interest import RequestGroup
from embedq.coordination.memory import MemoryHotStore
from embedq.coordination.outcomes import publish_vectors
from embedq.coordination.redis_store import RedisHotStore
from embedq.coordination.store import Hold, HotStore
from embedq.coordination.waiting import REQUEST
from embedq.deployment import Deployment
from embedq.errors import EmbeddingTimeout, InvalidInput
from embedq.fingerprint import EncodeSpec, fingerprint
from embedq.models.vectors import to_bytes
from embedq.service import EmbeddingService
from embedq.tasks.executor import QueueExecutor
from embedq.workers.local import LocalExecutor
from tests import support
from tests.unit.conftest import open_store


class Here:
    """A deployment on `store`, its service, and its forward-pass ledger."""

    def __init__(self, store: HotStore, executor: str, tmp: Path) -> None:
        self.ledger = tmp / "ledger.txt"
        settings = Settings.from_env({
            "EMBEDQ_DATA_DIR": str(tmp), "EMBEDQ_ENCODER": "faulty",
            "EMBEDQ_LEDGER_PATH": str(self.ledger), "EMBEDQ_ONLINE_ENCODE": executor,
            "EMBEDQ_BATCH_WAIT_MS": "5"})
        self.deployment = Deployment.from_settings(settings, hot=store)
        self.service: EmbeddingService = self.deployment.service

    def stored(self) -> None:
        """Until what this process computed is stored (the local executor answers its
        caller before the writes; the queue's worker, after them)."""
        executor = self.deployment.executor
        if isinstance(executor, LocalExecutor):
            executor.drain()

    def passes(self, text: str) -> int:
        return support.ledger_counts(self.ledger).get(support.text_digest(text), 0)


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> Iterator[HotStore]:
    """The service's paths on two stores: the store's own contract runs on the cluster
    too (test_hot_store), and these would only repeat it at a second a test."""
    yield from open_store(request)


@pytest.fixture(params=["queue", "local"])
def here(request: pytest.FixtureRequest, store: HotStore, tmp_path: Path) -> Iterator[Here]:
    deployment = Here(store, request.param, tmp_path)
    yield deployment
    deployment.deployment.close()


def test_the_deployment_picks_the_executor(here: Here) -> None:
    local = here.service.settings.queue.online_encode == "local"
    kind = LocalExecutor if local else QueueExecutor
    assert isinstance(here.service.executor, kind)


def test_a_miss_is_computed_once_then_answered_from_the_stores(here: Here, salt: str
                                                               ) -> None:
    texts = [f"{salt} one", f"{salt} two", f"{salt} one"]
    first = here.service.embed(texts, timeout_s=30)
    assert [o.source for o in first.outcomes] == ["computed"] * 3
    for outcome, text in zip(first.outcomes, texts, strict=True):
        np.testing.assert_allclose(outcome.vector, support.hashing_vector(text),
                                   rtol=1e-5, atol=1e-6)
    assert (here.passes(texts[0]), here.passes(texts[1])) == (1, 1)
    assert first.counts["submitted"] == 2 and first.counts["coalesced"] == 1
    here.stored()
    again = here.service.embed(texts[:2], timeout_s=30)
    # A remote hot store has this process's memory tier in front of it.
    nearest = "local" if here.service.hot.remote else "hot"
    assert [o.source for o in again.outcomes] == [nearest, nearest]
    fps = [fingerprint(here.service.spec(), t) for t in texts[:2]]
    assert set(here.service.durable.get_many(fps)) == set(fps)
    assert here.service.hot.holders(Hold.CLAIM, fps) == [None, None]  # freed once stored
    assert here.passes(texts[0]) == 1


def test_a_vector_only_the_durable_store_holds_is_found_there(here: Here, salt: str
                                                             ) -> None:
    text = f"{salt} durable only"
    here.service.embed([text], timeout_s=30)
    here.stored()
    fp = fingerprint(here.service.spec(), text)
    assert fp in here.service.durable.get_many([fp])
    store = here.service.hot
    if store.remote:
        # The hot copies (and claims) gone, on one Redis or every master of a cluster;
        # the database keeps all.
        assert isinstance(store, RedisHotStore)
        store.client.flushdb()
    fresh = Here(store if store.remote else MemoryHotStore(), "queue", here.ledger.parent)
    try:
        got = fresh.service.embed([text], timeout_s=30)
        assert got.outcomes[0].source == "durable" and here.passes(text) == 1
    finally:
        fresh.deployment.close()


def test_a_text_claimed_elsewhere_is_joined_not_computed(here: Here, salt: str) -> None:
    text = f"{salt} computed elsewhere"
    fp = fingerprint(here.service.spec(), text)
    here.service.hot.claim([fp], "another-producer", 60_000)
    vector = to_bytes(np.asarray(support.hashing_vector(text), dtype=np.float32))
    # joined before the test ends: the answer may arrive while the publish still reads
    # its replies, and the store must not close under it
    publisher = threading.Timer(0.3, publish_vectors, args=(here.service.hot, {fp: vector}, 60))
    publisher.start()
    got = here.service.embed([text], timeout_s=30)
    publisher.join()
    assert got.outcomes[0].source == "coalesced" and got.counts["coalesced"] == 1
    assert here.passes(text) == 0


def test_a_claim_whose_holder_vanished_is_taken_over(here: Here, salt: str) -> None:
    text = f"{salt} orphaned"
    fp = fingerprint(here.service.spec(), text)
    here.service.hot.claim([fp], "a-producer-that-died", 60_000)
    releaser = threading.Timer(0.3, here.service.hot.release, args=(Hold.CLAIM, [fp]))
    releaser.start()
    got = here.service.embed([text], timeout_s=30)
    releaser.join()
    assert got.outcomes[0].error is None and here.passes(text) == 1


def test_a_group_whose_requests_all_left_stops_waiting(here: Here, salt: str) -> None:
    text = f"{salt} held by someone slow"
    fp = fingerprint(here.service.spec(), text)
    here.service.hot.claim([fp], "a-slow-producer", 60_000)
    group = RequestGroup([1])
    threading.Timer(0.3, group.leave, args=(0,)).start()
    started = time.monotonic()
    got = here.service.embed([text], timeout_s=30, group=group)
    assert isinstance(got.outcomes[0].error, EmbeddingTimeout)
    assert time.monotonic() - started < 10  # the departure ended it, not the timeout


def test_a_claim_nobody_answers_times_out_with_the_work_still_claimed(
        here: Here, salt: str) -> None:
    text = f"{salt} never answered"
    fp = fingerprint(here.service.spec(), text)
    here.service.hot.claim([fp], "a-producer-still-working", 60_000)
    got = here.service.embed([text], timeout_s=0.5)
    assert isinstance(got.outcomes[0].error, EmbeddingTimeout)
    assert here.service.hot.holders(Hold.CLAIM, [fp]) == ["a-producer-still-working"]


def test_a_bad_text_fails_alone(here: Here, salt: str) -> None:
    texts = [f"{salt} fine", f"{salt} broken [[nan]]"]
    got = here.service.embed(texts, timeout_s=30)
    assert got.outcomes[0].error is None and got.outcomes[0].vector is not None
    assert got.outcomes[1].error is not None and "NaN or Inf" in str(got.outcomes[1].error)


def test_empty_and_non_text_inputs_are_refused_before_any_io(here: Here) -> None:
    with pytest.raises(InvalidInput, match="input 1 is an empty string"):
        here.service.embed(["x", ""])
    with pytest.raises(InvalidInput, match="input 0 is not a string"):
        here.service.embed([3])  # type: ignore[list-item]


def test_work_this_process_does_not_serve_goes_to_the_queue(store: HotStore,
                                                            tmp_path: Path) -> None:
    """The local executor hands what its runtime does not serve (another revision) to its
    fallback, the queue; the worker there refuses it by name, and nothing is settled
    here."""
    here = Here(store, "local", tmp_path)
    try:
        executor = here.deployment.executor
        assert isinstance(executor, LocalExecutor)
        assert isinstance(executor.fallback, QueueExecutor)
        spec = EncodeSpec("hashing", "another-revision")
        text = "a text for a revision nobody here serves"
        fp = fingerprint(spec, text)
        group = RequestGroup([1])
        group.bind([fp], time.monotonic() + 30)
        assert here.service.hot.claim([fp], group.owner, 30_000).won == [fp]
        assert executor.start(spec, [(fp, text)], Ticket(group.owner, group),
                              time.monotonic() + 30) == {}
        got = here.service.waiting.wait([fp], REQUEST, deadline=time.monotonic() + 30)
        assert "another-revision" in str(got.failures[fp]) and here.passes(text) == 0
    finally:
        here.deployment.close()
