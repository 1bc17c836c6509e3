"""Scenario: Redis out of memory (maxmemory reached, policy noeviction) in the middle of a
bulk job and of online requests, then memory back.

A Redis of the test's own is set to refuse every write for a few seconds. Online callers
are told Redis is out of memory (a retryable 503 that says so), never that the broker is
unreachable; the job loses nothing, and resumes within the bound derived from the
settings (visibility timeout, restore sweep and its mutex, or the tick's close of a wave
whose callback was refused; one chunk), not after kombu's 300 s restore mutex or beat's
stall rescue; after it, online requests get their vectors."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from embedq.errors import BrokerOutOfMemory, EmbedqError
from embedq.jobs.dispatch import Dispatcher
from embedq.jobs.service import JobService
from embedq.service import EmbeddingService
from embedq.tasks.app import restore_mutex_expire_s
from tests import support
from tests.faults.helpers import fault_env, scaled
from tests.faults.procs import RedisServer, wait_until
from tests.faults.recorder import Recorder
from tests.faults.test_redis_restart import start_beat

pytestmark = pytest.mark.integration

JOB_TEXTS = scaled(1500, 800)
CHUNK = 100
OOM_S = 4.0
CALLERS = 20
STALL_S = 120  # beat's stall rescue far off: recovery must not need it
CHUNK_S = CHUNK * 0.01 + 2  # a chunk's sleeps plus its queries, generously


def test_redis_out_of_memory_is_named_and_the_job_resumes_once_memory_is_back(
    rep: int, record: Recorder, own_redis: RedisServer, pg_url: str, tmp_path: Path,
    salt: str,
) -> None:
    env = fault_env(own_redis.url, pg_url, tmp_path, f"oom-{salt}", job_chunk_max_texts=CHUNK,
                    job_wave_chunks=2, job_tick_s=1, job_stall_s=STALL_S,
                    request_timeout_s=10, publish_retry_s=0.5)
    settings = support.settings_from(env)
    worker = support.WorkerProcess(env, tmp_path / "worker.log").start()
    beat = start_beat(env, tmp_path / "beat.log")
    jobs = JobService(EmbeddingService(settings))
    service = EmbeddingService(settings)
    job_id = jobs.submit([f"{salt} oom bulk {i} [[sleep:0.01]]" for i in range(JOB_TEXTS)])
    answers: list[object] = []

    def caller(i: int) -> None:
        try:
            outcome = service.embed([f"{salt} oom online {i}"], timeout_s=8).outcomes[0]
            answers.append(outcome.error or "vector")
        except EmbedqError as exc:
            answers.append(exc)

    try:
        wait_until(lambda: jobs.describe(job_id)["progress"]["chunks_done"] >= 2, 120,
                   "two chunks done", interval_s=0.05)
        own_redis.set_maxmemory("1")
        threads = [threading.Thread(target=caller, args=(i,), daemon=True)
                   for i in range(CALLERS)]
        for t in threads:
            t.start()
        time.sleep(OOM_S)  # the outage itself: Redis refusing every write this long
        for t in threads:
            t.join(timeout=30)
        at_memory = jobs.describe(job_id)["progress"]["chunks_done"]
        own_redis.set_maxmemory("0")
        back = time.monotonic()
        wait_until(lambda: jobs.describe(job_id)["progress"]["chunks_done"] > at_memory, 120,
                   "a chunk done after memory came back", interval_s=0.05)
        resumed_s = time.monotonic() - back
        wait_until(lambda: jobs.describe(job_id)["status"] in ("succeeded", "failed"), 300,
                   "the job finishing", interval_s=0.25)
        finished_s = time.monotonic() - back
        after = service.embed([f"{salt} oom after {i}" for i in range(CALLERS)], timeout_s=30)
    finally:
        worker.stop()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(beat.pid, signal.SIGKILL)
        beat.wait(timeout=30)

    state = jobs.describe(job_id)
    named = [a for a in answers if isinstance(a, BrokerOutOfMemory) and "out of memory" in str(a)]
    unreachable = [a for a in answers if "unreachable" in str(a)]
    # A chunk whose requeue Redis refused comes back by the visibility sweep; a wave whose
    # chord callback Redis refused is closed by the tick once the grace after its last
    # chunk (before the outage) has passed.
    swept = (settings.queue.visibility_timeout_s + settings.queue.restore_interval_s
             + restore_mutex_expire_s(settings))
    closed = max(0.0, Dispatcher.close_grace_s(settings) - OOM_S) + settings.jobs.tick_s
    bound = max(swept, closed) + CHUNK_S
    record.figure("online_answers_during_oom", len(answers), worse="lower", limit=CALLERS)
    record.figure("online_out_of_memory_named", len(named), worse="lower", limit=CALLERS)
    record.figure("online_said_unreachable", len(unreachable), limit=0)
    record.figure("job_resumed_after_memory_s", round(resumed_s, 2), limit=round(bound, 2))
    record.figure("job_finished_after_memory_s", round(finished_s, 2))
    record.figure("job_done", state["progress"]["done"], worse="lower", limit=JOB_TEXTS)
    record.figure("online_vectors_after", sum(o.vector is not None for o in after.outcomes),
                  worse="lower", limit=CALLERS)
    assert len(answers) == CALLERS and len(named) == CALLERS, answers[:3]
    assert not unreachable
    assert resumed_s <= bound, (resumed_s, bound)
    assert state["status"] == "succeeded" and state["progress"]["done"] == JOB_TEXTS, state
    assert all(o.vector is not None for o in after.outcomes)
