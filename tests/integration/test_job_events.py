"""Pushed job events on real Redis, Postgres, an `embedq worker` and `embedq beat`: signed
callbacks to a real receiver on 127.0.0.1 (verified with the snippet of docs/jobs.md),
retried while it is down; the Server-Sent Events stream over HTTP, behind an API key."""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from embedq.jobs.callbacks import backoff_s
from embedq.jobs.service import JobService
from embedq.models.job import CallbackState
from embedq.service import EmbeddingService
from embedq.testing.processes import free_port
from tests import support
from tests.receiver import Receiver, documented_verifier

pytestmark = pytest.mark.integration

SECRET = "integration-callback-secret"
KEY = "events-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
verify = documented_verifier()


@dataclass
class EventsCluster:
    env: dict[str, str]
    tmp: Path
    api: str
    jobs: JobService
    worker: support.WorkerProcess

    def ticks(self) -> int:
        """`embedq.jobs_tick` tasks the worker has finished (beat sends two a second)."""
        log = (self.tmp / "worker.log").read_text(errors="replace")
        return len(re.findall(r"Task embedq\.jobs_tick\[[^\]]+\] succeeded", log))

    def wait_state(self, job_id: str, callback: str, timeout_s: float = 60) -> Any:
        support.wait_until(lambda: self.jobs.get(job_id).callback_state == callback,
                           timeout_s, f"job {job_id}'s callback turning {callback}",
                           interval_s=0.1)
        return self.jobs.get(job_id)


@contextlib.contextmanager
def api_server(settings: Any) -> Iterator[str]:
    """The whole API (`create_app`, API keys on), served in this process on a free port
    on `embedq serve`'s protocol (a Server-Sent Events stream's parts come apart in time)."""
    import uvicorn

    from embedq.api.app import create_app
    from embedq.api.transport import JoiningHttpToolsProtocol

    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=0,
                                           log_level="warning", http=JoiningHttpToolsProtocol))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    support.wait_until(lambda: server.started, 60, "the API server starting")
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def start_beat(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "embedq.cli", "--loglevel", "info", "beat"], env=env,
        stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True,
        cwd=support.ROOT,
    )


@pytest.fixture(scope="module")
def ec(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EventsCluster]:
    """A worker and a beat on queues and a database of their own, so the tick sees only
    this module's jobs and no other worker takes its tasks."""
    support.check_postgres()
    tmp = tmp_path_factory.mktemp("events")
    with support.temporary_database() as pg_url:
        env = support.cluster_env(
            redis_url, pg_url, ledger_path=tmp / "ledger.txt", online_queue="online-events",
            bulk_queue="bulk-events", job_chunk_max_texts=50, job_wave_chunks=1,
            job_tick_s=0.5, callback_secret=SECRET, callback_allow="127.0.0.1",
            # The receiver is in this process and answers at once; an attempt cut off by a
            # killed worker is sent again after a lease of 2 x this timeout + 5 s.
            callback_backoff_s=0.25, callback_timeout_s=2, api_keys=KEY,
        )
        worker = support.WorkerProcess(env, tmp / "worker.log").start()
        beat = start_beat(env, tmp / "beat.log")
        settings = support.settings_from(env)
        cluster: EventsCluster | None = None
        try:
            with api_server(settings) as api:
                cluster = EventsCluster(env, tmp, api, JobService(EmbeddingService(settings)),
                                        worker)
                yield cluster
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(beat.pid, signal.SIGKILL)
            beat.wait(timeout=30)
            (cluster.worker if cluster else worker).stop()


def submit(ec: EventsCluster, texts: list[str], **fields: Any) -> str:
    r = httpx.post(f"{ec.api}/v1/jobs", json={"input": texts, "priority": "bulk", **fields},
                   headers=AUTH, timeout=30)
    assert r.status_code == 202, r.text
    job_id: str = r.json()["id"]
    return job_id


def test_a_job_with_a_callback_gets_exactly_one_signed_delivery(ec: EventsCluster,
                                                                salt: str) -> None:
    receiver = Receiver()
    try:
        job_id = submit(ec, [f"{salt} hook {i}" for i in range(120)],
                        callback_url=receiver.url())
        job = ec.wait_state(job_id, CallbackState.DELIVERED)
        assert job.callback_attempts == 1 and job.callback_error is None
        # Beat's tick runs every half second: three more ticks must send nothing again.
        ticks = ec.ticks()
        support.wait_until(lambda: ec.ticks() >= ticks + 3, 30, "three more ticks")
        [delivery] = receiver.got()
        assert delivery.answered == 200 and delivery.delivery_id == job_id
        assert verify(SECRET, delivery.signature, delivery.body)
        assert not verify("a-wrong-secret", delivery.signature, delivery.body)
        body = json.loads(delivery.body)
        state = httpx.get(f"{ec.api}/v1/jobs/{job_id}", headers=AUTH).json()
        assert state.pop("callback") == {"state": "delivered", "attempts": 1, "error": None}
        assert body == state and body["status"] == "succeeded"
        assert body["progress"]["done"] == 120
    finally:
        receiver.stop()


def test_a_receiver_that_is_down_gets_the_delivery_once_it_is_back(ec: EventsCluster,
                                                                   salt: str) -> None:
    port = free_port()  # nothing listens there yet: connections are refused
    job_id = submit(ec, [f"{salt} down {i}" for i in range(20)],
                    callback_url=f"http://127.0.0.1:{port}/hooks")
    # An attempt counts when it starts: at 2, the first has ended, refused.
    support.wait_until(lambda: ec.jobs.get(job_id).callback_attempts >= 2, 60,
                       "a refused attempt and a retry", interval_s=0.05)
    refused = ec.jobs.get(job_id)
    assert refused.callback_state == CallbackState.PENDING
    assert "ConnectError" in (refused.callback_error or "")
    receiver = Receiver(port=port, status=500)
    try:
        support.wait_until(lambda: len(receiver.got(500)) >= 2, 60, "two 500 answers",
                           interval_s=0.01)
        receiver.status = 200
        job = ec.wait_state(job_id, CallbackState.DELIVERED)
        got = receiver.got()
        assert [d.answered for d in got] == [500, 500, 200]
        refused_n = job.callback_attempts - len(got)  # the refused ones never arrived
        assert refused_n >= 1
        assert {d.delivery_id for d in got} == {job_id}  # one idempotency id throughout
        assert all(verify(SECRET, d.signature, d.body) for d in got)
        # Backoff: the wait after failure n is 0.25 s * 2**(n-1); the 500s were attempts
        # refused_n + 1 and + 2.
        settings = ec.jobs.settings
        gaps = [b.at - a.at for a, b in itertools.pairwise(got)]
        assert gaps[0] >= 0.9 * backoff_s(refused_n + 1, settings), (refused_n, gaps)
        assert gaps[1] >= 0.9 * backoff_s(refused_n + 2, settings), (refused_n, gaps)
        assert json.loads(got[-1].body)["status"] == "succeeded"
    finally:
        receiver.stop()


def test_a_delivery_cut_off_by_a_killed_worker_is_sent_again(ec: EventsCluster,
                                                             salt: str) -> None:
    """At least once: the worker dies while the receiver holds its POST; the attempt's
    lease ends and the tick on a new worker sends the delivery again, with the same id."""
    receiver = Receiver()
    receiver.release.clear()
    try:
        job_id = submit(ec, [f"{salt} killed {i}" for i in range(20)],
                        callback_url=receiver.url())
        support.wait_until(lambda: receiver.arrived == 1, 60, "the first attempt arriving")
        ec.worker.kill_group()
        receiver.release.set()  # its answer reaches no one
        assert ec.jobs.get(job_id).callback_state == CallbackState.PENDING
        ec.worker = support.WorkerProcess(ec.env, ec.tmp / "worker.log").start()
        lease_s = 2 * ec.jobs.settings.callbacks.timeout_s + 5
        job = ec.wait_state(job_id, CallbackState.DELIVERED, timeout_s=lease_s + 60)
        got = receiver.got()
        assert len(got) == 2 and job.callback_attempts == 2
        assert {d.delivery_id for d in got} == {job_id}
        assert all(verify(SECRET, d.signature, d.body) for d in got)
        assert got[1].at - got[0].at >= lease_s * 0.9
    finally:
        receiver.stop()


def read_events(response: httpx.Response) -> Iterator[tuple[float, dict[str, str]]]:
    """(arrival time, fields) for each event of an SSE stream; comments skipped."""
    fields: dict[str, str] = {}
    for line in response.iter_lines():
        if not line:
            if "data" in fields:
                yield time.monotonic(), fields
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")


def test_the_event_stream_shows_progress_at_most_once_a_second_and_ends_final(
    ec: EventsCluster, salt: str
) -> None:
    # Five chunks of 50, one at a time, each a batch that sleeps 0.8 s: progress moves
    # several times over a few seconds.
    job_id = submit(ec, [f"{salt} sse {i} [[sleep:0.8]]" for i in range(250)])
    url = f"{ec.api}/v1/jobs/{job_id}/events"
    assert httpx.get(url).status_code == 401
    assert httpx.get(f"{ec.api}/v1/jobs/nope/events", headers=AUTH).status_code == 404
    with httpx.stream("GET", url, headers=AUTH, timeout=60) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = list(read_events(response))  # returns only when the server ends it
    states = [json.loads(e["data"]) for _, e in events]
    assert all(e["event"] == "state" and e["id"] for _, e in events)
    assert states[-1]["status"] == "succeeded" and states[-1]["progress"]["done"] == 250
    assert all(s["status"] in {"queued", "running"} for s in states[:-1])
    done = [s["progress"]["done"] for s in states]
    assert len(states) >= 3 and done == sorted(done), done
    assert all(a != b for a, b in itertools.pairwise(states))  # changes only
    times = [t for t, _ in events]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= 0.9, gaps
    final = httpx.get(f"{ec.api}/v1/jobs/{job_id}", headers=AUTH).json()
    assert states[-1] == final
    # A client that has the final state (by its event id) is told to stop: 204.
    again = httpx.get(url, headers={**AUTH, "Last-Event-ID": events[-1][1]["id"]})
    assert again.status_code == 204


def test_a_client_that_disconnects_stops_the_stream(ec: EventsCluster, salt: str,
                                                    caplog: pytest.LogCaptureFixture
                                                    ) -> None:
    caplog.set_level(logging.INFO, logger="embedq.api.jobs")
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    job_id = submit(ec, [f"{salt} later"], not_before=later)  # stays queued
    closed = f"events of job {job_id}: stream closed, the client disconnected"
    try:
        with httpx.stream("GET", f"{ec.api}/v1/jobs/{job_id}/events", headers=AUTH,
                          timeout=30) as response:
            # Hold the generator: a dropped one is closed at once, and closing it closes
            # the connection under it, which is the disconnect this test makes on purpose.
            events = read_events(response)
            first = next(events)[1]
            assert json.loads(first["data"])["status"] == "queued"
            assert closed not in caplog.text
        support.wait_until(lambda: closed in caplog.text, 10, "the server closing the stream")
    finally:
        assert ec.jobs.cancel(job_id)


def test_callbacks_are_refused_where_the_server_may_not_post(ec: EventsCluster,
                                                             salt: str) -> None:
    before = len(ec.jobs.list(10_000))
    for url, words in [("http://169.254.169.254/latest/meta-data", "EMBEDQ_CALLBACK_ALLOW"),
                       ("file:///etc/passwd", "http://"),
                       ("http://127.0.0.1/" + "a" * 2100, "2048")]:
        r = httpx.post(f"{ec.api}/v1/jobs", headers=AUTH,
                       json={"input": [f"{salt} x"], "callback_url": url})
        assert r.status_code == 422, r.text
        assert words in r.json()["error"]["message"]
    src = ec.tmp / f"cli-{salt}.txt"
    src.write_text(f"{salt} cli\n")
    run = subprocess.run(
        [sys.executable, "-m", "embedq.cli", "bulk", str(src), "--now",
         "--callback-url", "https://hooks.example.com/x"],
        env=ec.env, cwd=support.ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "EMBEDQ_CALLBACK_ALLOW" in run.stderr, run.stderr
    assert len(ec.jobs.list(10_000)) == before
