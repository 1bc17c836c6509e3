"""Scenario 5: Postgres gone for 30 s while clients submit and poll jobs over HTTP.

The API reaches Postgres through a TCP proxy the test cuts (the machine's Postgres is
shared, so it is never stopped itself). Every answer is a 2xx or a 503 with Retry-After,
never a 500 and never a hang; every job that got a 202 is there after recovery and
finishes; the first request after recovery succeeds."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from tests import support
from tests.faults.helpers import fault_env, scaled
from tests.faults.procs import wait_until
from tests.faults.recorder import Recorder
from tests.integration.test_api_support import ApiServer, TcpProxy

pytestmark = pytest.mark.integration

OUTAGE_S = scaled(30, 6)
CLIENTS = 4
CLIENT_TIMEOUT_S = 20  # a request slower than this counts as a hang


@pytest.fixture
def proxy(pg_url: str) -> Iterator[TcpProxy]:
    url = make_url(pg_url)
    server = TcpProxy(url.host or "127.0.0.1", url.port or 5432).start()
    try:
        yield server
    finally:
        server.stop()


def test_database_outage_answers_503_and_keeps_every_accepted_job(
    rep: int, record: Recorder, redis_url: str, pg_url: str, proxy: TcpProxy, tmp_path: Path,
    salt: str,
) -> None:
    env = fault_env(redis_url, pg_url, tmp_path, f"pg-{salt}")
    worker = support.WorkerProcess(env, tmp_path / "worker.log").start()
    proxied = make_url(pg_url).set(port=proxy.port).render_as_string(hide_password=False)
    api = ApiServer({**env, "EMBEDQ_DATABASE_URL": proxied}, tmp_path / "api.log").start()
    stop = threading.Event()
    accepted: list[str] = []
    # (route, status, has Retry-After, sent at, answered at, client)
    statuses: list[tuple[str, int, bool, float, float, int]] = []
    hangs: list[str] = []
    lock = threading.Lock()

    def client(n: int) -> None:
        with httpx.Client(base_url=api.url, timeout=CLIENT_TIMEOUT_S) as http:
            i = 0
            while not stop.is_set():
                i += 1
                calls: list[tuple[str, str, str, object]] = [("submit", "POST", "/v1/jobs",
                          {"input": [f"{salt} ingest {n} {i} {k}" for k in range(3)]})]
                with lock:
                    if accepted:
                        calls.append(("poll", "GET", f"/v1/jobs/{accepted[i % len(accepted)]}",
                                      None))
                for route, method, path, body in calls:
                    sent = time.monotonic()
                    try:
                        r = http.request(method, path, json=body)
                    except httpx.TimeoutException:
                        hangs.append(route)
                        continue
                    with lock:
                        statuses.append((route, r.status_code, "retry-after" in r.headers, sent,
                                         time.monotonic(), n))
                        if route == "submit" and r.status_code == 202:
                            accepted.append(r.json()["id"])
                time.sleep(0.1)

    def answered_since(moment: float) -> set[int]:
        with lock:
            return {s[5] for s in statuses if s[3] > moment and s[1] in {200, 202}}

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(CLIENTS)]
    try:
        for t in threads:
            t.start()
        # Jobs accepted before the cut, for the clients to poll through the outage.
        wait_until(lambda: len(accepted) >= 2 * CLIENTS, 30, "jobs accepted before the cut")
        proxy.stop()
        cut_at = time.monotonic()
        time.sleep(OUTAGE_S)
        restored_at = time.monotonic()
        proxy.start()
        first = httpx.post(api.url + "/v1/jobs", json={"input": [f"{salt} first after"]},
                           timeout=CLIENT_TIMEOUT_S)
        # The load goes on past the restore until every client has been answered again.
        wait_until(lambda: answered_since(restored_at) == set(range(CLIENTS)), 30,
                   "every client answered after the restore")
        stop.set()
        for t in threads:
            t.join(timeout=CLIENT_TIMEOUT_S + 5)
        assert first.status_code == 202, (first.status_code, first.text)
        accepted.append(first.json()["id"])
        with httpx.Client(base_url=api.url, timeout=CLIENT_TIMEOUT_S) as http:
            finished = wait_until(
                lambda: all(http.get(f"/v1/jobs/{j}").json()["status"] == "succeeded"
                            for j in accepted), 120, "every accepted job finishing",
                interval_s=0.5)
            missing = [j for j in accepted if http.get(f"/v1/jobs/{j}").status_code != 200]
    finally:
        stop.set()
        api.stop()
        worker.stop()

    # Requests wholly inside the outage (not the ones racing the cut or the restore).
    during = [s for s in statuses if s[3] > cut_at + 0.5 and s[4] < restored_at]
    server_errors = [s for s in statuses if s[1] >= 500 and s[1] != 503]
    bare_503 = [s for s in statuses if s[1] == 503 and not s[2]]
    unexpected = [s for s in statuses if s[1] not in {200, 202, 503}]
    record.figure("answers_during_outage", len(during), worse="lower")
    record.figure("503_during_outage", sum(1 for s in during if s[1] == 503), worse="lower")
    record.figure("500s", len(server_errors), limit=0)
    record.figure("503_without_retry_after", len(bare_503), limit=0)
    record.figure("hangs", len(hangs), limit=0)
    record.figure("accepted_jobs_missing", len(missing), limit=0)
    record.figure("accepted_jobs", len(accepted), worse="lower")
    record.figure("all_finished_s", round(finished, 1))
    assert first.status_code == 202, first.text
    assert during and all(s[1] == 503 for s in during), during[:5]
    assert not server_errors and not bare_503 and not unexpected and not hangs
    assert not missing
