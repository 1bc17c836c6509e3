"""A worker serves one model revision and refuses work fingerprinted for another."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from embedq.errors import EmbeddingFailed
from embedq.fingerprint import fingerprint
from embedq.service import EmbeddingService
from tests import support

pytestmark = pytest.mark.integration


def test_a_worker_refuses_a_revision_it_does_not_serve(
    redis_url: str, pg_url: str, tmp_path: Path, salt: str,
) -> None:
    ledger = tmp_path / "ledger.txt"
    env = support.cluster_env(redis_url, pg_url, model_revision="rev-a", ledger_path=ledger,
                              online_queue=f"rev-{salt}", bulk_queue=f"rev-bulk-{salt}")
    log_path = tmp_path / "worker.log"
    worker = support.WorkerProcess(env, log_path).start()
    try:
        ready = re.search(r"ready: model=(\S+) revision=(\S+) dimension=(\S+) device=(\S+)",
                          log_path.read_text())
        assert ready is not None and ready.groups() == ("all-MiniLM-L6-v2", "rev-a", "384",
                                                        "cpu")
        texts = [f"{salt} fingerprinted for revision b {i}" for i in range(3)]
        other = EmbeddingService(support.settings_from({**env, "EMBEDQ_MODEL_REVISION": "rev-b"}))
        result = other.embed(texts, timeout_s=30)
        for outcome in result.outcomes:
            assert type(outcome.error) is EmbeddingFailed, outcome.error
            message = str(outcome.error)
            assert "'rev-a'" in message and "'rev-b'" in message
            assert "EMBEDQ_MODEL_REVISION" in message
        fps = [fingerprint(result.spec, t) for t in texts]
        assert other.durable.get_many(fps) == {}
        assert other.hot.vectors(fps) == [None] * len(fps)
        digests = {hashlib.sha256(t.encode()).hexdigest() for t in texts}
        assert not digests & set(support.ledger_counts(ledger))  # no forward pass either

        served = EmbeddingService(support.settings_from(env))
        assert all(o.error is None for o in served.embed(texts, timeout_s=30).outcomes)
        other.close()
        served.close()
    finally:
        worker.stop()
