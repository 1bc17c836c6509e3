"""Work nobody waits for any more is not encoded: real Redis, Postgres, `embedq worker`
and `embedq serve` processes, and an embedded deployment for one coalesced group.

The worker is kept busy by a text whose batch sleeps (`[[sleep:S]]`), so a request's text
reaches the model only after its caller is gone; the faulty encoder's ledger counts
forward passes outside the system under test.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from embedq.api.coalescing import RequestCoalescer
from embedq.config import Settings
from embedq.coordination.store import Hold
from embedq.deployment import Deployment
from embedq.errors import EmbeddingTimeout
from embedq.fingerprint import fingerprint
from embedq.jobs.service import JobService
from embedq.models import JobStatus
from embedq.models.vectors import from_bytes
from embedq.service import EmbeddingService
from tests import support
from tests.integration.test_api_support import ApiServer

pytestmark = pytest.mark.integration

BUSY_S = 3.0  # a caller leaves after 0.5 s or 1 s: 2 s left to register it


digest = support.text_digest
expected = support.hashing_vector


class AbandonCluster:
    """A worker on queues of its own, so only this module's work moves `abandoned`."""

    def __init__(self, env: dict[str, str], worker: support.WorkerProcess, tmp: Path
                 ) -> None:
        self.env = env
        self.worker = worker
        self.tmp = tmp
        self.ledger = tmp / "ledger.txt"

    def service(self) -> EmbeddingService:
        return EmbeddingService(support.settings_from(self.env))

    def passes(self) -> dict[str, int]:
        return support.ledger_counts(self.ledger)

    @contextlib.contextmanager
    def busy(self, salt: str) -> Iterator[None]:
        """The worker's model is encoding a batch that sleeps BUSY_S seconds; the block
        runs meanwhile, and this waits for that batch to finish."""
        text = f"{salt} keeps the worker busy [[sleep:{BUSY_S}]]"
        service = self.service()
        thread = threading.Thread(target=service.embed, args=([text],),
                                  kwargs={"timeout_s": 60})
        thread.start()
        support.wait_until(lambda: digest(text) in self.passes(), 30,
                           "the worker started the busy batch")
        try:
            yield
        finally:
            thread.join(timeout=60)


@pytest.fixture(scope="module")
def ac(redis_url: str, pg_url: str, tmp_path_factory: pytest.TempPathFactory
       ) -> Iterator[AbandonCluster]:
    tmp = tmp_path_factory.mktemp("abandon")
    env = support.cluster_env(redis_url, pg_url, ledger_path=tmp / "ledger.txt",
                              online_queue="online-abandon", bulk_queue="bulk-abandon")
    worker = support.WorkerProcess(env, tmp / "worker.log").start()
    try:
        yield AbandonCluster(env, worker, tmp)
    finally:
        worker.stop()


@pytest.fixture(scope="module")
def api(ac: AbandonCluster) -> Iterator[ApiServer]:
    with ApiServer(ac.env, ac.tmp / "api.log") as server:
        yield server


def abandoned(service: EmbeddingService) -> int:
    return service.stats()["abandoned"]


def test_a_request_that_timed_out_before_its_text_was_reached_costs_no_forward_pass(
        ac: AbandonCluster, salt: str) -> None:
    service = ac.service()
    text = f"{salt} wanted only briefly"
    fp = fingerprint(service.spec(), text)
    before = abandoned(service)
    with ac.busy(salt):
        result = service.embed([text], timeout_s=0.5)
        assert isinstance(result.outcomes[0].error, EmbeddingTimeout)
    support.wait_until(lambda: abandoned(service) == before + 1, 15,
                       "the worker counted the text as abandoned")
    assert digest(text) not in ac.passes()
    assert service.hot.vectors([fp]) == [None]
    assert service.hot.holders(Hold.CLAIM, [fp]) == [None]
    # Its claim was released: the next caller claims and computes it as usual.
    again = service.embed([text], timeout_s=30).outcomes[0]
    assert (again.error, again.source) == (None, "computed")
    assert ac.passes()[digest(text)] == 1


def test_a_text_one_caller_left_is_encoded_for_the_caller_still_waiting(
        ac: AbandonCluster, salt: str) -> None:
    leader, waiter = ac.service(), ac.service()
    text = f"{salt} still wanted by one"
    fp = fingerprint(leader.spec(), text)
    before = abandoned(leader)
    with ac.busy(salt):
        gone = threading.Thread(target=leader.embed, args=([text],), kwargs={"timeout_s": 0.5})
        gone.start()
        support.wait_until(lambda: leader.hot.holders(Hold.CLAIM, [fp])[0] is not None,
                           10, "the leaving caller claimed the text")
        result = waiter.embed([text], timeout_s=60)
        gone.join()
    outcome = result.outcomes[0]
    assert outcome.error is None and outcome.source == "coalesced"
    np.testing.assert_allclose(outcome.vector, expected(text), rtol=1e-5, atol=1e-6)
    assert ac.passes()[digest(text)] == 1
    assert abandoned(leader) == before


def test_a_job_chunk_wanting_an_abandoned_text_still_gets_its_vector(
        ac: AbandonCluster, salt: str) -> None:
    """The chunk lost the claim to an online caller that then left: the worker drops the
    online message and releases its claim, the chunk re-claims the text and encodes it."""
    service = ac.service()
    jobs = JobService(ac.service())
    text, other = f"{salt} online then bulk", f"{salt} bulk only"
    fp = fingerprint(service.spec(), text)
    before = abandoned(service)
    with ac.busy(salt):
        gone = threading.Thread(target=service.embed, args=([text],), kwargs={"timeout_s": 1})
        gone.start()
        support.wait_until(lambda: service.hot.holders(Hold.CLAIM, [fp])[0] is not None,
                           10, "the leaving caller claimed the text")
        job_id = jobs.submit([text, other])
        gone.join()
    support.wait_until(lambda: jobs.describe(job_id)["status"] in JobStatus.final(), 60,
                       "the job ended")
    assert jobs.describe(job_id)["status"] == "succeeded"
    rows = list(jobs.results(job_id, 0, 10))
    for row, want in zip(rows, (text, other), strict=True):
        assert row.vector is not None
        np.testing.assert_allclose(from_bytes(row.vector), expected(want), rtol=1e-5, atol=1e-6)
    assert ac.passes()[digest(text)] == 1
    assert abandoned(service) == before + 1
    assert "chunk re-claims 1 fingerprints whose leader vanished" in \
        (ac.tmp / "worker.log").read_text()


def _body(route: str, text: str) -> dict[str, Any]:
    return {"input": [text]} if route == "/v1/embeddings" else {"inputs": [text]}


def _requests_by_status(api: ApiServer, route: str, status: int) -> float:
    metrics = httpx.get(api.url + "/metrics", timeout=30).text
    label = f'embedq_http_requests_total{{method="POST",route="{route}",status="{status}"}}'
    for line in metrics.splitlines():
        if line.startswith(label):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.parametrize("route", ["/v1/embeddings", "/embed"])
def test_a_client_that_disconnects_costs_no_forward_pass(
        ac: AbandonCluster, api: ApiServer, salt: str, route: str) -> None:
    service = ac.service()
    text = f"{salt} the client hung up"
    before = abandoned(service)
    with ac.busy(salt), pytest.raises(httpx.ReadTimeout):
        # The server's request timeout is 120 s: only the disconnect ends this interest.
        httpx.post(api.url + route, json=_body(route, text), timeout=1.0)
    support.wait_until(lambda: abandoned(service) == before + 1, 15,
                       "the worker counted the text as abandoned")
    assert digest(text) not in ac.passes()
    assert _requests_by_status(api, route, 499) >= 1
    metrics = httpx.get(api.url + "/metrics", timeout=30).text
    assert f"embedq_abandoned_total {float(before + 1)}" in metrics


def test_a_text_one_client_hung_up_on_is_encoded_for_the_client_still_waiting(
        ac: AbandonCluster, api: ApiServer, salt: str) -> None:
    service = ac.service()
    text = f"{salt} one client left"
    fp = fingerprint(service.spec(), text)
    before = abandoned(service)

    def hang_up() -> None:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(api.url + "/v1/embeddings", json={"input": [text]}, timeout=1.0)

    with ac.busy(salt):
        first = threading.Thread(target=hang_up)
        first.start()
        support.wait_until(lambda: service.hot.holders(Hold.CLAIM, [fp])[0] is not None,
                           10, "the first client's request claimed the text")
        response = httpx.post(api.url + "/v1/embeddings", json={"input": [text]}, timeout=60)
        first.join()
    assert response.status_code == 200, response.text
    vector = response.json()["data"][0]["embedding"]
    np.testing.assert_allclose(vector, expected(text), rtol=1e-5, atol=1e-6)
    assert ac.passes()[digest(text)] == 1
    assert abandoned(service) == before


# --- one coalesced group, in-process (embedded deployment: memory store and broker)
def test_a_request_leaving_its_group_abandons_only_what_no_other_request_wants(
        tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    settings = Settings.from_env({"EMBEDQ_ENCODER": "faulty", "EMBEDQ_DATA_DIR": str(tmp_path),
                                  "EMBEDQ_LEDGER_PATH": str(ledger)})
    deployment = Deployment.from_settings(settings)
    try:
        deployment.ensure_worker()
        service = deployment.service
        busy = f"busy [[sleep:{BUSY_S / 2}]]"
        thread = threading.Thread(target=service.embed, args=([busy],))
        thread.start()
        support.wait_until(lambda: digest(busy) in support.ledger_counts(ledger), 30,
                           "the embedded worker started the busy batch")

        async def group() -> list[Any]:
            batcher = RequestCoalescer(service, wait_ms=2, max_texts=64)
            batcher.start()
            try:
                # Both are queued before the batcher's loop runs: one group, one call.
                leaving = asyncio.create_task(batcher.embed(["shared", "only mine"], None))
                staying = asyncio.create_task(batcher.embed(["shared"], None))
                await asyncio.sleep(0.3)
                assert batcher.in_flight == 1
                leaving.cancel()  # what the routes do when its client disconnects
                return await staying
            finally:
                await batcher.close()

        outcomes = asyncio.run(group())
        thread.join()
        assert outcomes[0].error is None
        np.testing.assert_allclose(outcomes[0].vector, expected("shared"), rtol=1e-5,
                                   atol=1e-6)
        support.wait_until(lambda: service.stats()["abandoned"] == 1, 10,
                           "the text only the leaving request wanted was abandoned")
        passes = support.ledger_counts(ledger)
        assert passes.get(digest("shared")) == 1 and digest("only mine") not in passes
    finally:
        deployment.close()
