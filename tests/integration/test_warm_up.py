"""A worker warms its model up before it takes any message: with a message already
waiting when `embedq worker` starts, the warm-up still comes before the first text."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from embedq.service import EmbeddingService
from embedq.tasks.depth import broker_depth
from tests import support
from tests.faults.procs import wait_until

pytestmark = pytest.mark.integration


def test_the_worker_warms_up_before_it_takes_a_waiting_message(
    redis_url: str, pg_url: str, tmp_path: Path, salt: str
) -> None:
    ledger = tmp_path / "ledger.txt"
    env = support.cluster_env(redis_url, pg_url, ledger_path=ledger,
                              online_queue=f"warm-online-{salt}", bulk_queue=f"warm-bulk-{salt}")
    settings = support.settings_from(env)
    service = EmbeddingService(settings)
    results: list[object] = []
    caller = threading.Thread(
        target=lambda: results.append(service.embed([f"{salt} waiting"], timeout_s=90)),
        daemon=True)
    caller.start()
    wait_until(lambda: broker_depth(service.app, settings.queue.online_queue) >= 1, 30,
               "the message waiting in the queue")
    assert not ledger.exists()  # no worker yet: nothing encoded
    worker = support.WorkerProcess(env, tmp_path / "worker.log").start()
    try:
        caller.join(timeout=90)
        assert results and results[0].outcomes[0].vector is not None  # type: ignore[attr-defined]
    finally:
        worker.stop()
    warm_ups = Path(f"{ledger}.warmup").read_text().split()
    # One warm-up, when the ledger was still empty: no text was encoded before it.
    assert warm_ups == ["warm-up", "0"], warm_ups
    assert ledger.read_text().count("\n") == 1
