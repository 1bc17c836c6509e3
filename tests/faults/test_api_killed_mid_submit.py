"""Scenario: the API process SIGKILLed in the middle of a large `POST /v1/jobs`.

The job row exists, part of its inputs are stored, and nothing will ever seal it. Beat
fails it once its inputs stopped arriving EMBEDQ_JOB_LOAD_TIMEOUT_S ago, so it stops
counting against the tenant's queued-inputs cap (a submission it blocked is accepted
again), and the tenant finds it, failed and saying why, in `GET /v1/jobs`."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from embedq.errors import QueueLimitReached
from embedq.jobs.service import JobService
from embedq.models import Job, JobItem
from embedq.service import EmbeddingService
from embedq.tenants import KeyStore
from tests import support
from tests.faults.helpers import fault_env
from tests.faults.procs import wait_until
from tests.faults.recorder import Recorder
from tests.faults.test_redis_restart import start_beat
from tests.integration.test_api_support import ApiServer

pytestmark = pytest.mark.integration

INPUTS = 60_000
CAP = INPUTS  # the tenant's queued inputs: while the orphan counts, a job this big is refused
LOAD_TIMEOUT_S = 3
TICK_S = 1


@pytest.fixture
def keyed_database() -> Iterator[str]:
    """A database of this scenario's own: the API key it creates makes every API on its
    database keyed for good (keyed only closes), which must not reach other scenarios."""
    with support.temporary_database() as url:
        yield url


def test_a_job_left_loading_by_a_killed_api_is_failed_and_frees_the_tenants_queue(
    rep: int, record: Recorder, redis_url: str, keyed_database: str, tmp_path: Path,
    salt: str,
) -> None:
    env = fault_env(redis_url, keyed_database, tmp_path, f"midsubmit-{salt}", job_tick_s=TICK_S,
                    job_load_timeout_s=LOAD_TIMEOUT_S, tenant_max_queued_inputs=CAP)
    settings = support.settings_from(env)
    jobs = JobService(EmbeddingService(settings))
    tenant = f"t{salt}"
    key = KeyStore(jobs.service.db).create(tenant, scopes="jobs").key
    auth = {"Authorization": f"Bearer {key}"}
    api = ApiServer(env, tmp_path / "api.log").start()
    body = {"input": [f"{salt} mid-submit {i}" for i in range(INPUTS)]}

    def submit() -> None:
        with contextlib.suppress(httpx.HTTPError):  # its server is killed under it
            httpx.post(f"{api.url}/v1/jobs", json=body, headers=auth, timeout=120)

    threading.Thread(target=submit, daemon=True).start()

    def loading() -> tuple[str, int] | None:
        with jobs.service.db.session() as s:
            row = s.execute(select(Job.id, Job.loaded).where(Job.tenant == tenant)).first()
            if row is None or row.loaded:
                return None
            return row.id, int(s.scalar(select(func.count()).select_from(JobItem)
                                        .where(JobItem.job_id == row.id)) or 0)

    wait_until(lambda: (loading() or ("", 0))[1] > 0, 60, "a first page of inputs stored",
               interval_s=0.01)
    assert api.proc is not None
    os.killpg(api.proc.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    api.stop()
    state = loading()
    assert state is not None, "the submission finished before the kill: nothing to test"
    job_id, stored_at_kill = state
    blocked = jobs.store.queued_inputs(tenant)
    with pytest.raises(QueueLimitReached):
        jobs.check_room(tenant, CAP)  # the orphan's stored inputs count against the cap
    worker = support.WorkerProcess(env, tmp_path / "worker.log").start()  # runs the ticks
    beat = start_beat(env, tmp_path / "beat.log")
    try:
        wait_until(lambda: jobs.describe(job_id)["status"] == "failed", 60,
                   "beat failing the orphaned job", interval_s=0.1)
        failed_s = time.monotonic() - killed_at
        counted_after = jobs.store.queued_inputs(tenant)
        jobs.check_room(tenant, CAP)  # the whole cap is the tenant's again
        with ApiServer(env, tmp_path / "api2.log") as again:
            listed = httpx.get(f"{again.url}/v1/jobs", headers=auth, timeout=30).json()
            retry = httpx.post(f"{again.url}/v1/jobs", headers=auth, timeout=60,
                               json={"input": [f"{salt} after {i}" for i in range(10)]})
    finally:
        worker.stop()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(beat.pid, signal.SIGKILL)
        beat.wait(timeout=30)

    orphan = next(j for j in listed["data"] if j["id"] == job_id)
    # The worker's and beat's start (processes started after the kill) and a tick's lag.
    bound = LOAD_TIMEOUT_S + TICK_S + 8
    record.figure("inputs_stored_at_kill", stored_at_kill)
    record.figure("queued_inputs_blocked_at_kill", blocked)
    record.figure("failed_after_kill_s", round(failed_s, 2), limit=bound)
    record.figure("orphan_inputs_counted_after", counted_after, limit=0)
    record.figure("resubmit_accepted", int(retry.status_code == 202), worse="lower", limit=1)
    assert 0 < stored_at_kill < INPUTS and blocked >= stored_at_kill
    assert orphan["status"] == "failed" and "submission stopped" in orphan["error"], orphan
    assert failed_s <= bound, (failed_s, bound)
    assert retry.status_code == 202, retry.text
    assert counted_after == 0
