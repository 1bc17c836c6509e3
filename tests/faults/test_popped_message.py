"""Scenario: a worker dies holding a message it popped but had not recorded.

kombu's Redis consumer pops a message (BRPOP) and then records it as unacknowledged; a
worker killed between the two takes the message with it, and no sweep can bring it back.
The scenario plays that window exactly: a consumer of the test's own pops the message
(an online request's, then a job chunk's) and dies without recording it. The losses are
bounded, as docs/operations.md says: the online caller gets its vector once the claim's
ttl ends (its waiter claims and queues the text again), the job finishes once beat's
stall rescue dispatches the lost chunk again."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

import pytest
import redis

from embedq.coordination.waiting import REQUEST
from embedq.jobs.service import JobService
from embedq.service import EmbeddingService, EmbedResult
from tests import support
from tests.faults.helpers import fault_env
from tests.faults.procs import wait_until
from tests.faults.recorder import Recorder
from tests.faults.test_redis_restart import start_beat

pytestmark = pytest.mark.integration

CLAIM_TTL_MS = 3000
STALL_S = 3
TICK_S = 1
SLACK_S = 3.0  # a publish, one batch and the answer's delivery, generously


def pop_and_die(url: str, queue: str, timeout_s: float = 30) -> float:
    """Pop one message off `queue` as kombu's consumer does, and never record it."""
    client = redis.Redis.from_url(url)
    popped = client.brpop([queue], timeout=int(timeout_s))
    assert popped is not None, f"no message reached {queue} in {timeout_s}s"
    client.close()
    return time.monotonic()


def test_a_message_popped_by_a_dying_worker_costs_a_claim_ttl_or_a_stall_rescue(
    rep: int, record: Recorder, redis_url: str, pg_url: str, tmp_path: Path, salt: str,
) -> None:
    env = fault_env(redis_url, pg_url, tmp_path, f"popped-{salt}", claim_ttl_ms=CLAIM_TTL_MS,
                    job_stall_s=STALL_S, job_tick_s=TICK_S, job_chunk_max_texts=50)
    settings = support.settings_from(env)
    service = EmbeddingService(settings)
    jobs = JobService(EmbeddingService(settings))
    got: dict[str, EmbedResult] = {}
    caller = threading.Thread(target=lambda: got.setdefault(
        "r", service.embed([f"{salt} popped online"], timeout_s=60)), daemon=True)
    caller.start()
    popped_at = pop_and_die(redis_url, settings.queue.online_queue)
    worker = support.WorkerProcess(env, tmp_path / "w1.log").start()
    beat = None
    try:
        caller.join(timeout=60)
        online_s = time.monotonic() - popped_at
        worker.stop()  # the chunk's message must reach the dying consumer, not a worker
        job_id = jobs.submit([f"{salt} popped bulk {i}" for i in range(50)])
        popped_at = pop_and_die(redis_url, settings.queue.bulk_queue)
        worker = support.WorkerProcess(env, tmp_path / "w2.log").start()
        beat = start_beat(env, tmp_path / "beat.log")
        wait_until(lambda: jobs.describe(job_id)["status"] == "succeeded", 60,
                   "the job finishing after its chunk was lost", interval_s=0.1)
        bulk_s = time.monotonic() - popped_at
    finally:
        worker.stop()
        if beat is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(beat.pid, signal.SIGKILL)
            beat.wait(timeout=30)

    online_bound = CLAIM_TTL_MS / 1000 + REQUEST.check_s + REQUEST.poll_s + SLACK_S
    bulk_bound = STALL_S + TICK_S + SLACK_S
    vector = "r" in got and got["r"].outcomes[0].vector is not None
    record.figure("online_vector", int(vector), worse="lower", limit=1)
    record.figure("online_answered_after_pop_s", round(online_s, 2), limit=online_bound)
    record.figure("job_done", jobs.describe(job_id)["progress"]["done"], worse="lower",
                  limit=50)
    record.figure("job_finished_after_pop_s", round(bulk_s, 2), limit=bulk_bound)
    assert vector, got
    assert online_s <= online_bound, (online_s, online_bound)
    assert bulk_s <= bulk_bound, (bulk_s, bulk_bound)
