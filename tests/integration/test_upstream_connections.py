"""The upstream encoder keeps its connections alive: sequential batches through a worker
reuse one pooled TCP connection instead of opening one per call (counted at the fake)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from embedq.service import EmbeddingService
from tests import support

pytestmark = pytest.mark.integration

BATCHES = 12


@pytest.fixture
def upstream() -> Iterator[support.FakeUpstream]:
    fake = support.FakeUpstream(latency_ms=20, max_concurrency=5)
    yield fake
    fake.stop()


def test_sequential_batches_reuse_one_upstream_connection(
    upstream: support.FakeUpstream, redis_url: str, pg_url: str, tmp_path: Path, salt: str
) -> None:
    env = support.cluster_env(redis_url, pg_url, encoder="upstream", upstream_url=upstream.url,
                              upstream_model="fake-embed", model_revision="fake-embed-v1",
                              online_queue=f"conn-{salt}", bulk_queue=f"conn-bulk-{salt}")
    worker = support.WorkerProcess(env, tmp_path / "worker.log").start()
    try:
        upstream.reset()  # what the worker's start-up sent is not under test
        service = EmbeddingService(support.settings_from(env))
        for i in range(BATCHES):
            assert service.embed([f"{salt} batch {i}"]).outcomes[0].vector is not None
    finally:
        worker.stop()
    stats = upstream.stats()
    assert stats["calls"] == BATCHES, stats
    assert stats["connections"] == 1, stats
