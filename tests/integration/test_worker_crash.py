"""A worker SIGKILLed mid-batch loses nothing: a restarted worker finishes the work."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select

from embedq.encoders.hashing import HashingEncoder
from embedq.fingerprint import fingerprint
from embedq.models import Embedding
from embedq.service import EmbeddingService, EmbedResult
from tests import support

pytestmark = pytest.mark.integration


def test_killed_worker_loses_nothing(redis_url: str, pg_url: str, tmp_path: Path,
                                     salt: str) -> None:
    ledger = tmp_path / "ledger.txt"
    env = support.cluster_env(
        redis_url, pg_url,
        ledger_path=ledger,
        online_queue=f"crash-online-{salt}",
        bulk_queue=f"crash-bulk-{salt}",
        visibility_timeout_s=4,
        restore_interval_s=1,
        run_lease_ms=3000,
        concurrency=16,
    )
    settings = support.settings_from(env)
    # Each batch sleeps 20 ms, so the kill lands mid-job. A message the killed worker had
    # popped but not yet recorded as unacknowledged is re-queued only when its claim
    # expires (60 s; docs/operations.md, "Recovery bound"): the timeout leaves room for it.
    texts = [f"{salt} crash {i} [[sleep:0.02]]" for i in range(500)]
    first = support.WorkerProcess(env, tmp_path / "w1.log").start()
    service = EmbeddingService(settings)
    result: list[EmbedResult] = []
    producer = threading.Thread(target=lambda: result.append(service.embed(texts,
                                                                           timeout_s=120)))
    producer.start()
    deadline = time.monotonic() + 30
    while len(support.ledger_counts(ledger)) < 64 and time.monotonic() < deadline:
        time.sleep(0.02)
    encoded_before_kill = len(support.ledger_counts(ledger))
    assert 0 < encoded_before_kill < 500, "the kill must land mid-job"
    first.kill_group()
    second = support.WorkerProcess(env, tmp_path / "w2.log").start()
    try:
        producer.join(timeout=120)
        assert not producer.is_alive()
    finally:
        second.stop()

    vectors = result[0].vectors()
    enc = HashingEncoder()
    for text, vec in zip(texts, vectors, strict=True):
        raw = enc.encode([text])[0]
        np.testing.assert_allclose(vec, raw / np.linalg.norm(raw), rtol=1e-5, atol=1e-6)
    spec = service.spec()
    fps = [fingerprint(spec, t) for t in texts]
    with service.db.session() as s:
        stored = set(s.scalars(select(Embedding.fingerprint).where(
            Embedding.fingerprint.in_(fps))))
    assert stored == set(fps)
    # Rows are unique by their primary key; the forward passes show a duplicate: a text
    # runs at most twice, once in the killed worker and once after it.
    passes = support.ledger_counts(ledger)
    assert len(passes) == 500 and max(passes.values()) <= 2, max(passes.values())
    recomputed = sum(n - 1 for n in passes.values())
    # At most the batch being encoded and the one being written were lost with the process.
    assert recomputed <= 2 * 64, recomputed
    assert "died" not in "".join(str(o.error) for o in result[0].outcomes)
