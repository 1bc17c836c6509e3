"""EMBEDQ_ONLINE_ENCODE=local: the process that receives online requests encodes their
misses itself. Real Redis, Postgres, `embedq serve` and `embedq worker` processes; the
faulty encoder's ledger counts forward passes outside the system under test.

No worker consumes this module's online queue unless a test starts one, so a request that
is answered was encoded here, and one that were queued instead would time out.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from redis import Redis

from embedq.config import Settings
from embedq.coordination import layout
from embedq.coordination.executor import Ticket
from embedq.coordination.interest import RequestGroup
from embedq.coordination.outcomes import publish_vectors, read_outcomes
from embedq.coordination.store import Hold
from embedq.coordination.waiting import REQUEST
from embedq.deployment import Deployment
from embedq.errors import EmbeddingTimeout, EmbedqError, PoisonText
from embedq.fingerprint import fingerprint
from embedq.models.vectors import to_bytes
from embedq.service import EmbeddingService
from embedq.tasks.depth import broker_depth
from embedq.workers.items import ONLINE
from embedq.workers.local import LocalExecutor
from tests import support
from tests.integration.test_api_support import ApiServer

pytestmark = pytest.mark.integration

QUEUES = {"online_queue": "online-local", "bulk_queue": "bulk-local"}


digest = support.text_digest
expected = support.hashing_vector


class Local:
    def __init__(self, env: dict[str, str], tmp: Path) -> None:
        self.env = env
        self.tmp = tmp
        self.ledger = tmp / "ledger.txt"
        self.deployment = Deployment.from_settings(support.settings_from(env))
        self.service = self.deployment.service

    def executor(self) -> LocalExecutor:
        """The executor encoding this deployment's online misses here."""
        executor = self.deployment.executor
        assert isinstance(executor, LocalExecutor)
        return executor

    def passes(self) -> dict[str, int]:
        return support.ledger_counts(self.ledger)

    def queueing(self) -> EmbeddingService:
        """A producer of the same deployment that queues its misses (no worker serves
        its queue here)."""
        settings = support.settings_from(self.env).with_overrides(online_encode="queue")
        return EmbeddingService(settings)


@pytest.fixture(scope="module")
def local(redis_url: str, pg_url: str, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[Local]:
    tmp = tmp_path_factory.mktemp("local")
    env = support.cluster_env(redis_url, pg_url, ledger_path=tmp / "ledger.txt",
                              online_encode="local", **QUEUES)
    here = Local(env, tmp)
    try:
        yield here
    finally:
        here.deployment.close()


def test_misses_are_encoded_here_stored_and_never_queued(local: Local, salt: str) -> None:
    texts = [f"{salt} first", f"{salt} second", f"{salt} first"]
    result = local.service.embed(texts, timeout_s=30)
    assert [o.source for o in result.outcomes] == ["computed", "computed", "computed"]
    for outcome, text in zip(result.outcomes, texts, strict=True):
        np.testing.assert_allclose(outcome.vector, expected(text), rtol=1e-5, atol=1e-6)
    assert local.passes()[digest(texts[0])] == 1 and local.passes()[digest(texts[1])] == 1
    assert broker_depth(local.service.app, QUEUES["online_queue"]) == 0
    local.executor().drain()
    fps = [fingerprint(local.service.spec(), t) for t in texts[:2]]
    assert set(local.service.durable.get_many(fps)) == set(fps)
    assert None not in local.service.hot.vectors(fps)
    assert local.service.hot.holders(Hold.CLAIM, fps) == [None, None]
    again = local.service.embed(texts[:2], timeout_s=30)
    assert [o.source for o in again.outcomes] == ["local", "local"]  # this process's tier
    assert local.passes()[digest(texts[0])] == 1


def test_a_producer_elsewhere_asking_meanwhile_joins_the_computation(
        local: Local, salt: str) -> None:
    text = f"{salt} wanted twice [[sleep:1.5]]"
    fp = fingerprint(local.service.spec(), text)
    answers: list[object] = []
    leader = threading.Thread(target=lambda: answers.append(
        local.service.embed([text], timeout_s=30).outcomes[0]))
    leader.start()
    support.wait_until(lambda: digest(text) in local.passes(), 15,
                       "the text reached the model here")
    # This producer queues to a queue no worker consumes: only joining the claim answers it.
    joined = local.queueing().embed([text], timeout_s=30).outcomes[0]
    leader.join(timeout=30)
    assert joined.error is None and joined.source == "coalesced"
    np.testing.assert_allclose(joined.vector, expected(text), rtol=1e-5, atol=1e-6)
    assert [getattr(a, "source", None) for a in answers] == ["computed"]
    assert local.passes()[digest(text)] == 1
    assert local.service.hot.holders(Hold.CLAIM, [fp]) == [None]


def _stored_elsewhere(local: Local, text: str) -> tuple[str, bytes]:
    """The hot copy another process wrote for `text` (it computed it and released its
    claim and lease) just after this process looked it up and missed."""
    fp = fingerprint(local.service.spec(), text)
    blob = _vector_of(text)
    local.service.hot.put_vectors({fp: blob}, ttl_s=60)
    return fp, blob


def _vector_of(text: str) -> bytes:
    """The stored form of the vector the hashing encoder computes for `text`."""
    return to_bytes(np.asarray(expected(text), dtype=np.float32))


def _claim_and_encode_here(local: Local, fp: str, text: str
                           ) -> dict[str, bytes | EmbedqError]:
    """What the service does for a miss it claimed: claim `fp` as one caller, then hand
    it to the local encoder; returns what that settled."""
    group = RequestGroup([1])
    group.bind([fp], time.monotonic() + 30)
    claimed = local.service.hot.claim([fp], group.owner, 30_000, group.interest([fp]))
    assert claimed.won == [fp]
    return local.executor().start(local.service.spec(), [(fp, text)],
                                  Ticket(group.owner, group), time.monotonic() + 30)


def _died_every_time(local: Local, fp: str) -> None:
    """`fp`'s attempt count at max_attempts: as many runs of it began as are allowed."""
    for _ in range(local.service.settings.queue.max_attempts):
        local.service.hot.count_attempts([fp], 600)


def test_a_vector_stored_between_lookup_and_claim_is_not_computed_again(
        local: Local, salt: str) -> None:
    text = f"{salt} stored meanwhile"
    fp, blob = _stored_elsewhere(local, text)
    settled = _claim_and_encode_here(local, fp, text)
    assert settled == {fp: blob}
    assert digest(text) not in local.passes()
    # The claim this caller won is freed, and no run lease was left behind.
    assert local.service.hot.holders(Hold.CLAIM, [fp]) == [None]
    assert local.service.hot.holders(Hold.LEASE, [fp]) == [None]


def test_a_text_another_runner_is_on_its_last_attempt_with_is_awaited_not_dead_lettered(
        local: Local, salt: str) -> None:
    """Attempt counts are read under the run lease, as on the worker path: a text that
    another execution is running for the last time (its count already at max_attempts)
    is that runner's to finish or to dead-letter, not failed here while it may succeed."""
    text = f"{salt} last attempt elsewhere"
    hot = local.service.hot
    fp = fingerprint(local.service.spec(), text)
    settings = local.service.settings
    _died_every_time(local, fp)
    runner = "worker-elsewhere"
    assert hot.lease([fp], runner, 30_000).won == {fp: settings.queue.max_attempts}
    settled = _claim_and_encode_here(local, fp, text)
    assert settled == {}  # left to its runner, awaited like any claim
    assert read_outcomes(hot, [fp]) == ({}, {}, [fp])
    assert hot.attempts([fp]) == [settings.queue.max_attempts]
    # The runner finishes: its vector answers the waiter, nothing was computed here.
    blob = _vector_of(text)
    publish_vectors(hot, {fp: blob}, 60)
    hot.release(Hold.LEASE, [fp], runner)
    got = local.service.waiting.wait([fp], REQUEST, deadline=time.monotonic() + 10)
    assert got.vectors == {fp: blob} and not got.failures
    assert digest(text) not in local.passes()


def test_a_text_that_killed_its_runners_is_dead_lettered_here_and_its_lease_freed(
        local: Local, salt: str) -> None:
    text = f"{salt} died every time"
    hot = local.service.hot
    fp = fingerprint(local.service.spec(), text)
    _died_every_time(local, fp)
    settled = _claim_and_encode_here(local, fp, text)
    assert list(settled) == [fp] and isinstance(settled[fp], PoisonText)
    _, failures, _ = read_outcomes(hot, [fp])
    assert isinstance(failures[fp], PoisonText)  # every waiter learns it
    assert hot.holders(Hold.LEASE, [fp]) == [None]
    assert hot.holders(Hold.CLAIM, [fp]) == [None]
    assert digest(text) not in local.passes()


def test_a_redelivery_finds_a_vector_stored_after_its_lookup(local: Local, salt: str
                                                             ) -> None:
    """The worker path: a redelivered message's texts looked up before their first copy
    finished are answered when leased, not encoded a second time."""
    text = f"{salt} redelivered"
    fp, _ = _stored_elsewhere(local, text)
    runtime = local.executor().runtime
    ran = runtime.embed_pairs(local.service.spec(), {fp: text}, ONLINE, durable=True)
    assert (ran.done, ran.reused) == ({fp}, {fp})
    assert digest(text) not in local.passes()


def test_a_caller_gone_before_its_batch_costs_no_forward_pass(local: Local, salt: str
                                                              ) -> None:
    busy = f"{salt} keeps the model busy [[sleep:2]]"
    text = f"{salt} wanted only briefly"
    before = local.service.stats().get("abandoned", 0)
    thread = threading.Thread(target=local.service.embed, args=([busy],),
                              kwargs={"timeout_s": 30})
    thread.start()
    support.wait_until(lambda: digest(busy) in local.passes(), 15, "the busy batch started")
    result = local.service.embed([text], timeout_s=0.5)
    assert isinstance(result.outcomes[0].error, EmbeddingTimeout)
    thread.join(timeout=30)
    support.wait_until(lambda: local.service.stats().get("abandoned", 0) == before + 1, 15,
                       "the text was counted as abandoned")
    assert digest(text) not in local.passes()
    # Its claim was released: the next caller computes it as usual.
    again = local.service.embed([text], timeout_s=30).outcomes[0]
    assert (again.error, again.source) == (None, "computed")
    assert local.passes()[digest(text)] == 1


def test_serve_encodes_with_no_worker_and_is_ready(local: Local, salt: str) -> None:
    env = {k: v for k, v in local.env.items() if k != "EMBEDQ_ONLINE_ENCODE"}
    with ApiServer(env, local.tmp / "api.log", "--online-encode", "local") as api:
        ready = httpx.get(api.url + "/readyz", timeout=10)
        assert ready.status_code == 200, ready.text
        text = f"{salt} through the API"
        resp = httpx.post(api.url + "/v1/embeddings", json={"input": text}, timeout=30)
        assert resp.status_code == 200, resp.text
        vector = np.array(resp.json()["data"][0]["embedding"])
        np.testing.assert_allclose(vector, expected(text), rtol=1e-5, atol=1e-6)
        assert local.passes()[digest(text)] == 1
    assert broker_depth(local.service.app, QUEUES["online_queue"]) == 0


def test_a_client_that_disconnects_costs_no_forward_pass(local: Local, salt: str) -> None:
    """The request timeout is 120 s: only the disconnect ends this caller's interest,
    which the API withdraws while its request waits for the model here."""
    busy = f"{salt} keeps the API's model busy [[sleep:2]]"
    text = f"{salt} the client hung up"
    before = local.service.stats().get("abandoned", 0)
    with ApiServer(local.env, local.tmp / "api-disconnect.log") as api:
        keeper = threading.Thread(target=_post_ignoring_errors, args=(api.url, busy))
        keeper.start()
        support.wait_until(lambda: digest(busy) in local.passes(), 15,
                           "the busy batch started in the API process")
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(api.url + "/v1/embeddings", json={"input": text}, timeout=0.5)
        keeper.join(timeout=30)
        support.wait_until(lambda: local.service.stats().get("abandoned", 0) == before + 1,
                           15, "the text was counted as abandoned")
    assert digest(text) not in local.passes()


def test_a_claim_left_by_a_dead_encoding_process_is_rescued(
        local: Local, salt: str, caplog: pytest.LogCaptureFixture) -> None:
    """The API process encoding a text dies (SIGKILL) holding its claim, while a caller
    elsewhere waits on that claim: once the claim expires the caller adopts it and queues
    the text, and a worker computes it."""
    caplog.set_level(logging.WARNING, logger="embedq.service")
    redis = Redis.from_url(local.env["EMBEDQ_REDIS_URL"])
    # The dead process's run lease lapses before the worker may encode the text: 3 s
    # rather than the default 15 s (it is refreshed each second while its runner lives).
    env = {**local.env, "EMBEDQ_CLAIM_TTL_MS": "2000", "EMBEDQ_RUN_LEASE_MS": "3000"}
    text = f"{salt} its encoder dies [[sleep:4]]"
    fp = fingerprint(local.service.spec(), text)
    queueing = {**env, "EMBEDQ_ONLINE_ENCODE": "queue"}
    worker = support.WorkerProcess(queueing, local.tmp / "worker.log").start()
    api = ApiServer(env, local.tmp / "api-dies.log").start()
    try:
        caller = threading.Thread(target=_post_ignoring_errors, args=(api.url, text))
        caller.start()
        support.wait_until(lambda: digest(text) in local.passes(), 15,
                           "the text reached the model in the API process")
        waited: list[object] = []
        waiter = threading.Thread(target=lambda: waited.append(EmbeddingService(
            support.settings_from(queueing)).embed([text], timeout_s=60).outcomes[0]))
        waiter.start()
        support.wait_until(lambda: redis.zcard(layout.interest(fp)) == 2, 15,
                           "the waiter joined the claim (two callers want the text)")
        assert local.service.hot.holders(Hold.CLAIM, [fp])[0] is not None
        assert api.proc is not None
        os.killpg(api.proc.pid, signal.SIGKILL)
        caller.join(timeout=30)
        waiter.join(timeout=60)
    finally:
        api.stop()
        worker.stop()
    result = waited[0]
    assert getattr(result, "error", "none") is None
    np.testing.assert_allclose(getattr(result, "vector", None), expected(text),
                               rtol=1e-5, atol=1e-6)
    assert local.passes()[digest(text)] == 2  # the dead process's pass, and the worker's
    assert "re-queueing 1 fingerprints whose claim expired" in caplog.text


def _post_ignoring_errors(url: str, text: str) -> None:
    with contextlib.suppress(httpx.HTTPError):  # the server dies under this request
        httpx.post(url + "/v1/embeddings", json={"input": text}, timeout=60)


def test_embedded_cli_stores_what_it_computed_before_exiting(tmp_path: Path) -> None:
    """A one-shot process answers before the writes and exits: it waits for the writer,
    so the next process finds the vector stored."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDQ_")}
    env.update({"EMBEDQ_DATA_DIR": str(tmp_path), "EMBEDQ_ENCODER": "hashing",
                "EMBEDQ_ONLINE_ENCODE": "local"})

    def embed() -> str:
        done = subprocess.run([sys.executable, "-m", "embedq.cli", "embed", "kept text"],
                              env=env, capture_output=True, text=True, timeout=120,
                              cwd=support.ROOT)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "(computed)" in embed()
    assert "(durable)" in embed()


def test_online_encode_is_checked() -> None:
    with pytest.raises(Exception, match="EMBEDQ_ONLINE_ENCODE='worker' is unknown"):
        Settings.from_env({"EMBEDQ_ONLINE_ENCODE": "worker"})
