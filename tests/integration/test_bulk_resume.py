"""Resume: SIGKILL every worker and flush the broker mid-job; after a restart the job
finishes, and no chunk whose vectors were already in Postgres runs again."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from embedq.jobs.service import JobService
from embedq.models import Embedding, JobChunk, JobItem
from embedq.service import EmbeddingService
from tests import support

pytestmark = pytest.mark.integration


def start_beat(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "embedq.cli", "--loglevel", "info", "beat"], env=env,
        stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True,
        cwd=support.ROOT,
    )


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def test_job_survives_killed_workers_and_a_flushed_broker(
    redis_url: str, pg_url: str, tmp_path: Path, salt: str
) -> None:
    ledger = tmp_path / "ledger.txt"
    env = support.cluster_env(
        redis_url, pg_url, ledger_path=ledger, online_queue=f"online-resume-{salt}",
        bulk_queue=f"bulk-resume-{salt}", job_chunk_max_texts=200, job_wave_chunks=2,
        job_tick_s=1, job_stall_s=3,
    )
    worker = support.WorkerProcess(env, tmp_path / "worker.log").start()
    beat = start_beat(env, tmp_path / "beat.log")
    jobs = JobService(EmbeddingService(support.settings_from(env)))
    texts = [f"{salt} resume {i % 2800} [[sleep:0.05]]" for i in range(3000)]
    job_id = jobs.submit(texts)
    try:
        deadline = time.monotonic() + 120
        while jobs.describe(job_id)["progress"]["chunks_done"] < 3:
            assert time.monotonic() < deadline, jobs.describe(job_id)
            time.sleep(0.1)
        worker.kill_group()
        kill_group(beat)
        support.flush_redis(redis_url)

        with jobs.service.db.session() as s:
            done_chunks = list(s.execute(select(JobChunk.start, JobChunk.stop).where(
                JobChunk.job_id == job_id, JobChunk.status == "done")))
            fps = {fp: text for fp, text in s.execute(select(JobItem.fingerprint, JobItem.text)
                                                      .where(JobItem.job_id == job_id))}
            stored_then = set(s.scalars(select(Embedding.fingerprint).where(
                Embedding.fingerprint.in_(list(fps)))))
        state = jobs.describe(job_id)
        assert state["status"] == "running" and state["progress"]["done"] < 3000
        passes_then = support.ledger_counts(ledger)

        worker = support.WorkerProcess(env, tmp_path / "worker2.log").start()
        beat = start_beat(env, tmp_path / "beat2.log")
        deadline = time.monotonic() + 180
        while (state := jobs.describe(job_id))["status"] != "succeeded":
            assert time.monotonic() < deadline, state
            time.sleep(0.25)
        assert state["progress"]["done"] == 3000 and state["progress"]["failed"] == 0
        assert state["progress"]["chunks_done"] == state["progress"]["chunks"]
    finally:
        worker.stop()
        kill_group(beat)

    passes = support.ledger_counts(ledger)
    digest = {fp: hashlib.sha256(text.encode()).hexdigest() for fp, text in fps.items()}
    # Vectors already in Postgres at the kill were never computed again...
    assert stored_then and all(passes[digest[fp]] == passes_then[digest[fp]]
                               for fp in stored_then)
    # ...so every text of a chunk that was done ran exactly once, and so did the rest
    # (a text cut off mid-batch by the kill may have run twice: its vector never landed).
    done_texts = {texts[i] for start, stop in done_chunks for i in range(start, stop)}
    assert done_texts and all(passes[hashlib.sha256(t.encode()).hexdigest()] == 1
                              for t in done_texts)
    assert all(passes.get(d, 0) >= 1 for d in digest.values())
    assert "dispatching again" in (tmp_path / "worker2.log").read_text()
