"""Scenario 4: Redis (broker, claims, hot tier) killed and restarted empty in the middle
of a 3,000-text bulk job and of 200 waiting online requests.

The job finishes from Postgres (beat re-dispatches its pending chunks) with no finished
chunk run again; each online caller gets its vector or a clear retryable error, none
past its timeout; no orphan claim blocks a later request for the same texts."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from embedq.coordination.store import Hold
from embedq.errors import EmbeddingTimeout, EmbedqError, Unavailable
from embedq.fingerprint import fingerprint
from embedq.jobs.service import JobService
from embedq.models import JobChunk
from embedq.service import EmbeddingService
from tests import support
from tests.faults.helpers import digest, fault_env, scaled
from tests.faults.procs import RedisServer, wait_until
from tests.faults.recorder import Recorder

pytestmark = pytest.mark.integration

JOB_TEXTS = scaled(3000, 1200)  # chunks of 200: the kill comes after 3 are done
ONLINE = 200
ONLINE_FLOOR = ONLINE  # online callers that must get their vector (see the assertion)
TIMEOUT_S = 20.0
RETRYABLE = (EmbeddingTimeout, Unavailable)


def start_beat(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "embedq.cli", "--loglevel", "info", "beat"], env=env,
        stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True,
        cwd=support.ROOT,
    )


def claimed(service: EmbeddingService, texts: list[str]) -> bool:
    """Whether every text is claimed: its caller has queued it and waits for it."""
    spec = service.spec()
    fps = [fingerprint(spec, t) for t in texts]
    return all(holder is not None for holder in service.hot.holders(Hold.CLAIM, fps))


def test_redis_restarted_empty_mid_job_and_mid_requests(
    rep: int, record: Recorder, own_redis: RedisServer, pg_url: str, tmp_path: Path,
    salt: str,
) -> None:
    env = fault_env(own_redis.url, pg_url, tmp_path, f"redis-{salt}", job_chunk_max_texts=200,
                    job_wave_chunks=2, job_tick_s=1, job_stall_s=3)
    settings = support.settings_from(env)
    ledger = Path(env["EMBEDQ_LEDGER_PATH"])
    worker = support.WorkerProcess(env, tmp_path / "worker.log").start()
    beat = start_beat(env, tmp_path / "beat.log")
    jobs = JobService(EmbeddingService(settings))
    job_id = jobs.submit([f"{salt} bulk {i} [[sleep:0.05]]" for i in range(JOB_TEXTS)])
    service = EmbeddingService(settings)
    # Each online batch sleeps, so callers are still waiting on their claims at the kill.
    online = [f"{salt} online {i} [[sleep:0.2]]" for i in range(ONLINE)]
    outcomes: dict[int, tuple[object, float]] = {}

    def caller(i: int) -> None:
        started = time.monotonic()
        try:
            got: object = service.embed([online[i]], timeout_s=TIMEOUT_S).outcomes[0]
            got = got.error or "vector"  # type: ignore[attr-defined]
        except EmbedqError as exc:
            got = exc
        outcomes[i] = (got, time.monotonic() - started)

    try:
        wait_until(lambda: jobs.describe(job_id)["progress"]["chunks_done"] >= 3, 120,
                   "three chunks done", interval_s=0.05)
        callers = [threading.Thread(target=caller, args=(i,), daemon=True)
                   for i in range(ONLINE)]
        for t in callers:
            t.start()
        wait_until(lambda: claimed(service, [online[i] for i in range(ONLINE)
                                             if i not in outcomes]), 60,
                   "every online caller answered or waiting on its claim")
        with jobs.service.db.session() as s:
            done_chunks = list(s.execute(select(JobChunk.start, JobChunk.stop).where(
                JobChunk.job_id == job_id, JobChunk.status == "done")))
        answered_before_kill = dict(outcomes)
        own_redis.kill()
        killed_at = time.monotonic()
        time.sleep(1.0)  # the outage itself: one second with no Redis at all
        own_redis.start()
        for t in callers:
            t.join(timeout=TIMEOUT_S + 30)
        assert not any(t.is_alive() for t in callers), "an online caller hung"
        wait_until(lambda: jobs.describe(job_id)["status"] == "succeeded", 180,
                   "the job finishing", interval_s=0.25)
        job_done_s = time.monotonic() - killed_at
        # Every caller that got an error asks again: no orphan claim may block it.
        again_at = time.monotonic()
        retried = [online[i] for i, (got, _) in outcomes.items() if got != "vector"]
        again = service.embed(retried, timeout_s=TIMEOUT_S) if retried else None
        retry_s = time.monotonic() - again_at
    finally:
        worker.stop()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(beat.pid, signal.SIGKILL)
        beat.wait(timeout=30)

    state = jobs.describe(job_id)
    passes = support.ledger_counts(ledger)
    texts_of_job = [f"{salt} bulk {i} [[sleep:0.05]]" for i in range(JOB_TEXTS)]
    done_texts = {texts_of_job[i] for start, stop in done_chunks for i in range(start, stop)}
    rerun = sum(1 for t in done_texts if passes.get(digest(t), 0) != 1)
    vectors = sum(1 for got, _ in outcomes.values() if got == "vector")
    retryable = [got for got, _ in outcomes.values() if isinstance(got, RETRYABLE)]
    unclear = [got for got, _ in outcomes.values()
               if got != "vector" and not isinstance(got, RETRYABLE)]
    worst_s = max(elapsed for _, elapsed in outcomes.values())
    refused_before_kill = [i for i, (got, _) in answered_before_kill.items() if got != "vector"]
    waiting_without_vector = [outcomes[i][0] for i in range(ONLINE)
                              if i not in answered_before_kill and outcomes[i][0] != "vector"]
    record.figure("online_vectors", vectors, worse="lower", limit=ONLINE_FLOOR)
    record.figure("online_retryable_errors", len(retryable))
    record.figure("online_refused_before_kill", len(refused_before_kill))
    record.figure("online_waiting_without_vector", len(waiting_without_vector), limit=0)
    record.figure("online_unclear_errors", len(unclear), limit=0)
    record.figure("online_worst_s", round(worst_s, 2), limit=TIMEOUT_S + 2)
    record.figure("finished_chunk_texts_rerun", rerun, limit=0)
    record.figure("job_done", state["progress"]["done"], worse="lower", limit=JOB_TEXTS)
    record.figure("job_finished_after_kill_s", round(job_done_s, 1))
    record.figure("retry_after_recovery_s", round(retry_s, 2),
                  limit=settings.queue.claim_ttl_ms / 1000)
    assert state["status"] == "succeeded" and state["progress"]["done"] == JOB_TEXTS, state
    assert done_texts and rerun == 0
    # A caller waiting on its claim when Redis died rides the outage out: it polls
    # through `Unavailable` and re-queues what the empty Redis lost, well inside its
    # timeout. So every one of them gets its vector.
    assert not waiting_without_vector, waiting_without_vector[:3]
    # No caller is refused before the kill either: 200 threads of one process share the
    # Redis client's pool, which makes callers past its size wait for a connection (it
    # used to refuse them, "Too many connections", 0-40 of 200 per run). So all of them.
    assert vectors >= ONLINE_FLOOR, (vectors, retryable[:3])
    assert vectors + len(retryable) == ONLINE, unclear[:3]
    assert all(str(e) for e in retryable)
    assert worst_s <= TIMEOUT_S + 2
    assert again is None or all(o.vector is not None for o in again.outcomes)
    assert retry_s < settings.queue.claim_ttl_ms / 1000, "an orphan claim blocked a later request"
