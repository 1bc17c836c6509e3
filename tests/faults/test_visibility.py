"""Scenario 3: batches that run close to the visibility timeout, two workers, no fault.

Messages wait behind a busy batcher and then run for most of the timeout, so the broker
hands some of them to the other worker while the first copy still runs. Each
fingerprint is still computed exactly once: run leases and the durable tier fence it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from embedq.service import EmbeddingService
from tests import support
from tests.faults.helpers import digest, fault_env, scaled
from tests.faults.recorder import Recorder

pytestmark = pytest.mark.integration

# Each worker takes 4 messages and encodes 2 a batch: the next 2 wait past the timeout,
# whatever the number of rounds (quick: 2 rounds of 2.5 s batches a worker, full: 3).
TEXTS = scaled(48, 32)
PER_MESSAGE = 4
VISIBILITY_TIMEOUT_S = 3
BATCH_S = 2.5  # of the 3 s timeout, before any wait in the batcher


def test_batches_near_the_visibility_timeout_run_once_per_fingerprint(
    rep: int, record: Recorder, redis_url: str, pg_url: str, tmp_path: Path, salt: str
) -> None:
    env = fault_env(redis_url, pg_url, tmp_path, f"vis-{salt}",
                    visibility_timeout_s=VISIBILITY_TIMEOUT_S, restore_interval_s=1,
                    run_lease_ms=3000, concurrency=4, batch_max_texts=8,
                    message_max_texts=PER_MESSAGE)
    ledger = Path(env["EMBEDQ_LEDGER_PATH"])
    texts = [f"{salt} slow {i} [[sleep:{BATCH_S}]]" for i in range(TEXTS)]
    logs = [tmp_path / "w1.log", tmp_path / "w2.log"]
    workers = [support.WorkerProcess(env, log).start() for log in logs]
    try:
        result = EmbeddingService(support.settings_from(env)).embed(texts, timeout_s=120)
    finally:
        for worker in workers:
            worker.stop()

    passes = support.ledger_counts(ledger)
    per_fp = [passes.get(digest(t), 0) for t in texts]
    deliveries = sum(len(re.findall(r"Task embedq\.embed\[[^\]]+\] received", log.read_text()))
                     for log in logs)
    messages = TEXTS // PER_MESSAGE
    record.figure("max_executions_per_fingerprint", max(per_fp), limit=1)
    record.figure("min_executions_per_fingerprint", min(per_fp), worse="lower", limit=1)
    record.figure("redeliveries", deliveries - messages)
    assert all(o.vector is not None for o in result.outcomes)
    assert deliveries > messages, "the scenario must provoke redeliveries to mean anything"
    assert per_fp == [1] * TEXTS, passes
