"""A remote OpenAI-compatible API as the encoder, against a local fake that injects faults."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from embedq.config import Settings
from embedq.encoders.upstream import UpstreamEncoder
from embedq.errors import UpstreamError
from embedq.service import EmbeddingService
from tests import support

pytestmark = pytest.mark.integration


@pytest.fixture
def upstream() -> Iterator[support.FakeUpstream]:
    fake = support.FakeUpstream(latency_ms=50, max_concurrency=5)
    yield fake
    fake.stop()


def encoder_for(fake: support.FakeUpstream, timeout_s: float = 5.0) -> UpstreamEncoder:
    settings = Settings.from_env({
        "EMBEDQ_ENCODER": "upstream", "EMBEDQ_UPSTREAM_URL": fake.url,
        "EMBEDQ_UPSTREAM_MODEL": "fake-embed", "EMBEDQ_UPSTREAM_TIMEOUT_S": str(timeout_s),
    })
    return UpstreamEncoder(settings)


def test_a_batch_goes_upstream_as_one_request(upstream: support.FakeUpstream) -> None:
    enc = encoder_for(upstream)
    out = enc.encode(["a", "b", "c"])
    assert out.shape == (3, 384) and enc.dimension == 384
    assert upstream.stats()["calls"] == 1


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
    env = support.cluster_env(redis_url, pg_url, encoder="upstream", upstream_url=upstream.url,
                              upstream_model="fake-embed", online_queue=f"up-{salt}",
                              bulk_queue=f"up-bulk-{salt}")
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
