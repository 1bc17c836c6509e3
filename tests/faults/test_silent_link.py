"""Scenario: the API's links to Redis and Postgres go silent under load (issue 15, item 12).

Silent, not refused: a proxy in front of each server stops forwarding and stops reading
while every socket stays open, the way a dropped-packet partition looks to a client. The
API (`embedq serve`) reaches both through the proxies; the worker reaches them directly.
Client threads keep sending embed requests throughout. No request may hang: each answers
200 (vectors) or a retryable 503 within the request timeout plus a small margin, and once
the link is back requests succeed again."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from tests import support
from tests.faults.helpers import fault_env
from tests.faults.procs import wait_until
from tests.faults.recorder import Recorder
from tests.faults.silent_proxy import SilentProxy
from tests.integration.test_api_support import ApiServer

pytestmark = pytest.mark.integration

MODEL = "all-MiniLM-L6-v2"
CLIENTS = 6
SILENT_S = 10
REQUEST_TIMEOUT_S = 6.0
MARGIN_S = 3.0  # scheduling on a loaded 2-core machine; a hang is unbounded
# Short link timeouts: each is a fraction of the request timeout.
LINKS = {
    "request_timeout_s": REQUEST_TIMEOUT_S,
    "db_connect_timeout_s": 1,
    "db_statement_timeout_ms": 1500,
    "db_lock_timeout_ms": 1000,
    "redis_socket_timeout_s": 1.5,
    "redis_connect_timeout_s": 1,
}


@pytest.fixture
def proxies(redis_url: str, pg_url: str) -> Iterator[tuple[SilentProxy, SilentProxy]]:
    r, p = make_url(redis_url), make_url(pg_url)
    redis_proxy = SilentProxy(r.host or "127.0.0.1", r.port or 6379).start()
    pg_proxy = SilentProxy(p.host or "127.0.0.1", p.port or 5432).start()
    try:
        yield redis_proxy, pg_proxy
    finally:
        redis_proxy.close()
        pg_proxy.close()


def test_silent_links_never_hang_a_request(
    rep: int, record: Recorder, redis_url: str, pg_url: str,
    proxies: tuple[SilentProxy, SilentProxy], tmp_path: Path, salt: str,
) -> None:
    redis_proxy, pg_proxy = proxies
    env = fault_env(redis_url, pg_url, tmp_path, f"silent-{salt}", **LINKS)
    worker = support.WorkerProcess(env, tmp_path / "worker.log").start()
    via_redis = make_url(redis_url).set(port=redis_proxy.port).render_as_string(
        hide_password=False)
    via_pg = make_url(pg_url).set(port=pg_proxy.port).render_as_string(hide_password=False)
    api = ApiServer({**env, "EMBEDQ_REDIS_URL": via_redis, "EMBEDQ_BROKER_URL": via_redis,
                     "EMBEDQ_DATABASE_URL": via_pg}, tmp_path / "api.log").start()
    stop = threading.Event()
    # (status or -1 for a client-side timeout, sent at, answered at)
    answers: list[tuple[int, float, float]] = []
    lock = threading.Lock()

    def client(n: int) -> None:
        with httpx.Client(base_url=api.url, timeout=REQUEST_TIMEOUT_S + 30) as http:
            i = 0
            while not stop.is_set():
                i += 1
                sent = time.monotonic()
                try:
                    r = http.post("/v1/embeddings", json={
                        "model": MODEL, "input": [f"{salt} silent {n} {i} {k}" for k in range(2)]})
                    status = r.status_code
                except httpx.TimeoutException:
                    status = -1
                with lock:
                    answers.append((status, sent, time.monotonic()))
                time.sleep(0.05)

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(CLIENTS)]
    try:
        for t in threads:
            t.start()
        wait_until(lambda: sum(1 for a in answers if a[0] == 200) >= CLIENTS, 30,
                   "every client's first vectors")
        redis_proxy.silence()
        pg_proxy.silence()
        silenced_at = time.monotonic()
        time.sleep(SILENT_S)
        redis_proxy.resume()
        pg_proxy.resume()
        resumed_at = time.monotonic()

        def recent_success() -> bool:
            with lock:
                return any(a[0] == 200 and a[1] > resumed_at for a in answers)

        recovered = wait_until(recent_success, 30, "a request succeeding after the link is back")
        settled_at = time.monotonic()
        time.sleep(2.5)  # an observation window: the load goes on after recovery, checked below
        stop.set()
        for t in threads:
            t.join(timeout=REQUEST_TIMEOUT_S + 35)
    finally:
        stop.set()
        api.stop()
        worker.stop()

    bound = REQUEST_TIMEOUT_S + MARGIN_S
    slowest = max(done - sent for _, sent, done in answers)
    during = [a for a in answers if a[1] > silenced_at and a[2] < resumed_at]
    hangs = [a for a in answers if a[0] == -1 or a[2] - a[1] > bound]
    unexpected = [a for a in answers if a[0] not in {200, 503, -1}]
    after = [a for a in answers if a[1] > settled_at + 1]
    record.figure("requests", len(answers), worse="lower")
    record.figure("answers_during_silence", len(during), worse="lower")
    record.figure("503_during_silence", sum(1 for a in during if a[0] == 503), worse="lower")
    record.figure("slowest_answer_s", round(slowest, 2), limit=bound)
    record.figure("hangs", len(hangs), limit=0)
    record.figure("non_retryable_errors", len(unexpected), limit=0)
    record.figure("recovered_s", round(recovered, 2))
    record.figure("failures_after_recovery", sum(1 for a in after if a[0] != 200), limit=0)
    assert not hangs, f"requests past {bound}s: {hangs[:5]}"
    assert not unexpected, unexpected[:5]
    assert any(a[0] == 503 for a in during), "the silence never reached a request"
    assert after and all(a[0] == 200 for a in after), after[:10]
