"""Scenario 6: 10,000 concurrent identical requests (2,000 under `make test`) over HTTP
from 200 client tasks.
One fingerprint, one claim, one queued computation, one forward pass; 10,000 answers,
all the same vector."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import numpy as np
import pytest

from embedq.encoders.hashing import HashingEncoder
from embedq.testing.loadgen import fire
from tests.conftest import Cluster
from tests.faults.helpers import digest, scaled
from tests.faults.recorder import Recorder
from tests.integration.test_api_support import ApiServer

pytestmark = pytest.mark.integration

REQUESTS = scaled(10_000, 2_000)
CALLERS = 200


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Iterator[ApiServer]:
    with ApiServer(cluster.env, cluster.tmp / "api-herd.log") as server:
        yield server


def test_identical_concurrent_requests_compute_once(
    rep: int, record: Recorder, api: ApiServer, cluster: Cluster, salt: str
) -> None:
    # The encode takes a second, so most requests arrive while it is in flight.
    text = f"{salt} the same question from everyone [[sleep:1]]"
    service = cluster.service()
    submitted_before = service.stats().get("submitted", 0)
    answers: dict[int, bytes] = {}
    statuses: dict[int, int] = {}

    def on_response(i: int, status: int, payload: bytes, latency_s: float) -> None:
        statuses[i] = status
        answers[i] = payload

    wall_s = asyncio.run(fire([api.url + "/v1/embeddings"], [{"input": text}] * REQUESTS,
                              CALLERS, on_response))
    vectors = {json.dumps(json.loads(p)["data"][0]["embedding"]) for p in answers.values()}
    passes = cluster.passes().get(digest(text), 0)
    queued = service.stats().get("submitted", 0) - submitted_before
    ok = sum(1 for s in statuses.values() if s == 200)
    record.figure("answers_200", ok, worse="lower", limit=REQUESTS)
    record.figure("forward_passes", passes, limit=1)
    record.figure("computations_queued", queued, limit=1)
    record.figure("distinct_vectors", len(vectors), limit=1)
    record.figure("requests_per_s", round(REQUESTS / wall_s), worse="lower")
    assert ok == REQUESTS and passes == 1 and queued == 1 and len(vectors) == 1
    raw = HashingEncoder().encode([text])[0]
    np.testing.assert_allclose(json.loads(vectors.pop()), raw / np.linalg.norm(raw),
                               rtol=1e-5, atol=1e-6)
