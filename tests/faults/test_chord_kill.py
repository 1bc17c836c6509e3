"""Scenario 7: a bulk job's chord with its worker SIGKILLed at 50%. Each wave's callback
acts once (a redelivered or duplicate callback finds its generation closed), the job
finishes, and every item has its vector."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from embedq.jobs.service import JobService
from embedq.models import JobStatus
from embedq.service import EmbeddingService
from tests import support
from tests.faults.helpers import fault_env
from tests.faults.procs import wait_until
from tests.faults.recorder import Recorder

pytestmark = pytest.mark.integration

TEXTS = 1000
CHUNK = 100
# Each batch sleeps this long: enough for the kill to land mid-job. After the kill, every
# text of the batch in flight is a suspect, encoded alone, and pays it once more per text.
BATCH_S = 0.05
CALLBACK = re.compile(r"Task embedq\.close_job\[([^\]]+)\] succeeded in [0-9.]+s: '(\w+)'")


def test_killed_worker_mid_chord_closes_each_wave_once_with_every_item(
    rep: int, record: Recorder, redis_url: str, pg_url: str, tmp_path: Path, salt: str
) -> None:
    env = fault_env(redis_url, pg_url, tmp_path, f"chord-{salt}", job_chunk_max_texts=CHUNK,
                    job_wave_chunks=2)
    logs = [tmp_path / "w1.log", tmp_path / "w2.log"]
    worker = support.WorkerProcess(env, logs[0]).start()
    jobs = JobService(EmbeddingService(support.settings_from(env)))
    job_id = jobs.submit([f"{salt} chord {i} [[sleep:{BATCH_S}]]" for i in range(TEXTS)])
    chunks = TEXTS // CHUNK
    try:
        wait_until(lambda: jobs.describe(job_id)["progress"]["chunks_done"] >= chunks // 2,
                   120, "half the chunks", interval_s=0.02)
        worker.kill_group()
        done_at_kill = jobs.describe(job_id)["progress"]["chunks_done"]
        worker = support.WorkerProcess(env, logs[1]).start()
        wait_until(lambda: jobs.describe(job_id)["status"] in JobStatus.final(), 120,
                   "the job finishing", interval_s=0.2)
    finally:
        worker.stop()

    state = jobs.describe(job_id)
    callbacks = [m.groups() for log in logs for m in CALLBACK.finditer(log.read_text())]
    acted = [what for _, what in callbacks if what != "stale"]
    generation = jobs.get(job_id).generation
    rows = list(jobs.results(job_id, 0, TEXTS))
    with_vector = sum(1 for r in rows if r.vector is not None and r.error is None)
    record.figure("chunks_done_at_kill", done_at_kill)
    record.figure("items_with_vector", with_vector, worse="lower", limit=TEXTS)
    record.figure("callbacks_acting", len(acted), limit=generation)
    record.figure("finished_callbacks", acted.count("finished"), limit=1)
    assert 0 < done_at_kill < chunks, "the kill must land mid-job"
    assert state["status"] == "succeeded" and state["progress"]["done"] == TEXTS, state
    assert with_vector == TEXTS
    assert acted.count("finished") == 1
    # One acting callback per wave: generations 1..G each closed exactly once.
    assert len(acted) == generation, (callbacks, generation)
