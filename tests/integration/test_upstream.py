"""A remote OpenAI-compatible API as the encoder, against a local fake that injects faults."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from mcp import Client as McpClient
from mcp.client.stdio import StdioServerParameters

from embedq import Client
from embedq.config import Settings
from embedq.encoders.hashing import HashingEncoder
from embedq.encoders.upstream import UpstreamEncoder
from embedq.errors import UpstreamError
from embedq.service import EmbeddingService
from tests import support
from tests.integration.test_api_support import ApiServer

pytestmark = pytest.mark.integration

REVISION = "fake-embed-v1"


@pytest.fixture
def upstream() -> Iterator[support.FakeUpstream]:
    fake = support.FakeUpstream(latency_ms=50, max_concurrency=5)
    yield fake
    fake.stop()


def encoder_for(fake: support.FakeUpstream, timeout_s: float = 5.0) -> UpstreamEncoder:
    settings = Settings.from_env({
        "EMBEDQ_ENCODER": "upstream", "EMBEDQ_UPSTREAM_URL": fake.url,
        "EMBEDQ_UPSTREAM_MODEL": "fake-embed", "EMBEDQ_UPSTREAM_TIMEOUT_S": str(timeout_s),
        "EMBEDQ_MODEL_REVISION": REVISION,
    })
    return UpstreamEncoder(settings)


def upstream_env(fake: support.FakeUpstream, redis_url: str, pg_url: str, salt: str
                 ) -> dict[str, str]:
    """A cluster whose workers' encoder is the fake upstream, on queues of its own."""
    return support.cluster_env(redis_url, pg_url, encoder="upstream", upstream_url=fake.url,
                               upstream_model="fake-embed", model_revision=REVISION,
                               online_queue=f"up-{salt}", bulk_queue=f"up-bulk-{salt}")


def test_a_batch_goes_upstream_as_one_request(upstream: support.FakeUpstream) -> None:
    enc = encoder_for(upstream)
    out = enc.encode(["a", "b", "c"])
    assert out.shape == (3, 384) and enc.dimension == 384
    assert upstream.stats()["calls"] == 1


def fake_vectors(texts: list[str]) -> np.ndarray:
    """What the fake upstream answers: the hashing encoder's vectors, normalized."""
    vectors = HashingEncoder().encode(texts)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_vectors_are_asked_in_base64_and_read_exactly(upstream: support.FakeUpstream
                                                      ) -> None:
    enc = encoder_for(upstream)
    out = enc.encode(["a", "b", "c"])
    assert enc.encoding_format == "base64" and out.dtype == np.float32
    assert np.array_equal(out, fake_vectors(["a", "b", "c"]))


def test_an_upstream_that_refuses_base64_is_asked_in_floats(
    upstream: support.FakeUpstream
) -> None:
    enc = encoder_for(upstream)
    upstream.faults(float_only=True)
    assert np.array_equal(enc.encode(["a", "b"]), fake_vectors(["a", "b"]))
    assert enc.encoding_format == "float" and upstream.stats()["calls"] == 2
    assert np.array_equal(enc.encode(["c"]), fake_vectors(["c"]))
    assert upstream.stats()["calls"] == 3  # floats from then on: no refused call first


def test_429_and_500_are_retried_at_most_twice(upstream: support.FakeUpstream) -> None:
    enc = encoder_for(upstream)
    upstream.faults([429, 500])
    assert enc.encode(["x"]).shape == (1, 384)
    assert upstream.stats()["calls"] == 3
    upstream.reset()
    upstream.faults([500, 503, 502])
    with pytest.raises(UpstreamError, match="failed after 3 attempts"):
        enc.encode(["y"])
    assert upstream.stats()["calls"] == 3


def test_a_timeout_is_retried(upstream: support.FakeUpstream) -> None:
    enc = encoder_for(upstream, timeout_s=0.5)
    upstream.faults(hang_s=2)
    assert enc.encode(["slow"]).shape == (1, 384)
    assert upstream.stats()["calls"] == 2


def test_a_client_error_is_not_retried(upstream: support.FakeUpstream) -> None:
    enc = encoder_for(upstream)
    upstream.faults([400])
    with pytest.raises(UpstreamError, match="HTTP 400"):
        enc.encode(["bad"])
    assert upstream.stats()["calls"] == 1


def test_workers_never_send_one_fingerprint_upstream_twice(
    upstream: support.FakeUpstream, redis_url: str, pg_url: str, tmp_path: Path, salt: str,
) -> None:
    env = upstream_env(upstream, redis_url, pg_url, salt)
    worker = support.WorkerProcess(env, tmp_path / "worker.log").start()
    try:
        service = EmbeddingService(support.settings_from(env))
        before = service.stats()
        texts = [f"{salt} hot doc {i}" for i in range(10)]
        upstream.faults([429, 500])
        rng = np.random.default_rng(1)
        picks = [texts[int(i)] for i in rng.integers(0, 10, size=200)]
        with ThreadPoolExecutor(50) as pool:
            results = list(pool.map(lambda t: service.embed([t]).vectors()[0], picks))
        assert len(results) == 200
        stats = upstream.stats()
        assert stats["distinct_texts"] == 10 and stats["texts_sent_more_than_once"] == 0
        after = service.stats()
        assert after["upstream_calls"] - before["upstream_calls"] == stats["calls"]
        assert after["tokens_saved"] > before["tokens_saved"]
    finally:
        worker.stop()


OUTAGE = [500, 503, 502]  # one request's calls: the first try and both retries


def test_an_upstream_outage_is_retryable_and_recovery_answers(
    upstream: support.FakeUpstream, redis_url: str, pg_url: str, tmp_path: Path, salt: str,
) -> None:
    """An outage reaches HTTP, Client and MCP callers as a retryable upstream failure
    (502 + Retry-After, never the 422 of bad input), three times over (more than
    max_attempts: an outage never dead-letters the text), and once the upstream is back
    the very same request succeeds.

    Relies on a new claim of a fingerprint clearing its earlier failure outcome
    (HotStore.claim): otherwise the first failure would answer the later requests.
    """
    env = upstream_env(upstream, redis_url, pg_url, salt)
    text = f"{salt} asked during an outage"
    body = {"model": "fake-embed", "input": [text]}
    worker = support.WorkerProcess(env, tmp_path / "worker.log").start()
    try:
        with ApiServer(env, tmp_path / "api.log") as api:
            upstream.faults(OUTAGE)
            resp = httpx.post(api.url + "/v1/embeddings", json=body, timeout=60)
            assert resp.status_code == 502, resp.text
            assert int(resp.headers["Retry-After"]) >= 1
            error = resp.json()["error"]
            assert (error["type"], error["code"]) == ("upstream_error", "upstream_failed")
            assert "HTTP 502" in error["message"] and "retry" in error["message"]
            assert str(upstream.port) not in error["message"]  # its address stays in the log

            upstream.faults(OUTAGE)
            with Client(support.settings_from(env)) as client:
                with pytest.raises(UpstreamError, match="retry") as raised:
                    client.embed([text])
                assert raised.value.retryable

            upstream.faults(OUTAGE)
            tool = asyncio.run(call_mcp_tool(env, "embed_text", {"text": text}))
            assert tool.is_error
            assert "failed after 3 attempts" in tool.content[0].text
            assert "retry" in tool.content[0].text

            assert upstream.stats()["calls"] == 3 * len(OUTAGE)  # each one reached upstream
            resp = httpx.post(api.url + "/v1/embeddings", json=body, timeout=60)
            assert resp.status_code == 200, resp.text
            assert len(resp.json()["data"][0]["embedding"]) == 384
            assert upstream.stats()["distinct_texts"] == 1
    finally:
        worker.stop()


async def call_mcp_tool(env: dict[str, str], name: str, arguments: dict[str, Any]) -> Any:
    """One tool call through a real `embedq mcp` process over stdio."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "embedq.cli", "mcp"],
                                   env=env, cwd=str(support.ROOT))
    async with McpClient(params, read_timeout_seconds=60) as mcp:
        return await mcp.call_tool(name, arguments)
