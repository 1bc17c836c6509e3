"""A worker holding unacknowledged messages when its Redis broker vanishes reconnects and
goes on serving; it does not die while kombu puts those messages back."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

import pytest

from embedq.errors import EmbedqError
from embedq.service import EmbeddingService
from tests import support
from tests.faults.helpers import fault_env
from tests.faults.procs import RedisServer, wait_until

pytestmark = pytest.mark.integration


def test_worker_survives_losing_redis_with_messages_unacked(
    own_redis: RedisServer, pg_url: str, tmp_path: Path, salt: str
) -> None:
    env = fault_env(own_redis.url, pg_url, tmp_path, f"reconnect-{salt}")
    settings = support.settings_from(env)
    worker = support.WorkerProcess(env, tmp_path / "worker.log").start()
    assert worker.proc is not None
    ledger = Path(env["EMBEDQ_LEDGER_PATH"])
    service = EmbeddingService(settings)
    texts = [f"{salt} in flight {i} [[sleep:1]]" for i in range(4)]

    def caller(text: str) -> None:
        # The outage may fail these; what is under test is the worker.
        with contextlib.suppress(EmbedqError):
            service.embed([text], timeout_s=30)

    callers = [threading.Thread(target=caller, args=(t,), daemon=True) for t in texts]
    try:
        for t in callers:
            t.start()
        # The batch is encoding: its messages are delivered and not yet acknowledged.
        wait_until(lambda: ledger.exists() and ledger.read_text().count("\n") >= 1, 30,
                   "the in-flight batch encoding")
        own_redis.kill()
        wait_until(lambda: "Connection to broker lost" in worker.log_path.read_text(), 30,
                   "the worker noticing the lost broker")
        own_redis.start()
        after = EmbeddingService(settings).embed([f"{salt} after the outage"], timeout_s=60)
        assert after.outcomes[0].vector is not None, after.outcomes[0].error
        assert worker.proc.poll() is None, "the worker died reconnecting"
        assert "Unrecoverable error" not in worker.log_path.read_text()
    finally:
        for t in callers:
            t.join(timeout=40)
        worker.stop()
