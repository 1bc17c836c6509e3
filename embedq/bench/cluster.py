"""The cluster a bench starts for itself: `embedq serve` and, when none is live, an
`embedq worker`, on this EMBEDQ_* environment (Redis and Postgres).

`preflight` names a missing Redis, broker or database (or its missing tables) within
seconds; `cluster` starts each process in its own process group and stops them all on the
way out, Ctrl-C and SIGTERM included; every wait has a deadline and says what it waited for.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from embedq.bench.jobs import live_workers_serving
from embedq.config import Settings
from embedq.coordination.redis_link import bounded_client
from embedq.errors import ConfigError, EmbedqError, Unavailable
from embedq.testing import processes

START_DEADLINE_S = 300.0  # worker model load + serve start on a busy 2-core machine
PREFLIGHT_TIMEOUT_S = 5.0


@dataclass
class Target:
    """The server under test and what this bench started for it."""

    url: str
    headers: dict[str, str]
    timeout_s: float
    started: dict[str, int] = field(default_factory=dict)  # process name -> pid
    counters: Callable[[], dict[str, int]] | None = None  # cluster counters, when known


def _where(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}:{parts.port}{parts.path}"


def preflight(settings: Settings) -> None:
    """Redis, the broker and Postgres reachable, the tables there: else a message naming
    what is missing and what to do, within seconds (every probe has a timeout)."""
    import redis
    from redis.exceptions import RedisClusterException

    from embedq.models import Database

    if settings.embedded or not settings.links.redis_url:
        raise ConfigError(
            "this bench runs against a cluster: set EMBEDQ_BROKER_URL, EMBEDQ_REDIS_URL and "
            "EMBEDQ_DATABASE_URL (Redis and Postgres), or pass --url of a running server"
        )
    links = {"EMBEDQ_REDIS_URL": settings.links.redis_url}
    if settings.links.broker_url.startswith(("redis://", "rediss://")):
        links["EMBEDQ_BROKER_URL"] = settings.links.broker_url
    for name, url in links.items():
        try:  # one Redis, or a Redis Cluster for EMBEDQ_REDIS_URL
            bounded_client(url, PREFLIGHT_TIMEOUT_S, PREFLIGHT_TIMEOUT_S).ping()
        except (redis.RedisError, RedisClusterException, EmbedqError) as exc:
            raise Unavailable(
                f"Redis at {_where(url)} ({name}) is not reachable ({exc}): start Redis "
                f"there, or point {name} at a running one"
            ) from exc
    db = Database.from_settings(settings)
    where = db.engine.url.render_as_string(hide_password=True)
    try:
        has_tables = db.has_tables("embeddings")
    except EmbedqError as exc:
        raise Unavailable(
            f"the database at {where} (EMBEDQ_DATABASE_URL) is not reachable ({exc}): start "
            "Postgres there, or point EMBEDQ_DATABASE_URL at a running one"
        ) from exc
    finally:
        db.dispose()
    if not has_tables:
        raise ConfigError(f"the database {where} has no embedq tables: run `embedq db upgrade`")


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"


@contextlib.contextmanager
def _stop_on_sigterm() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so the processes started here are stopped either way."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def cluster(settings: Settings, tmp: Path, *, jobs: bool = False) -> Iterator[Target]:
    """`embedq serve` (temporary key, free loopback port) and, when no live worker serves
    the configured model and the API queues its online misses (EMBEDQ_ONLINE_ENCODE=queue)
    or the bench runs a job (`jobs`: bulk work always goes to workers), an `embedq
    worker`; both stopped by process group on the way out."""
    from embedq.coordination import make_hot_store

    preflight(settings)
    key = secrets.token_urlsafe(24)
    env = {**os.environ, "EMBEDQ_API_KEYS": key, "PYTHONUNBUFFERED": "1"}
    procs: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
    with _stop_on_sigterm():
        try:
            # An API that encodes its own online misses needs no worker for them.
            queued = jobs or settings.queue.online_encode == "queue"
            if queued and not live_workers_serving(settings)[0]:
                log = tmp / "worker.log"
                procs["worker"] = (processes.spawn_worker(env, log), log)
            port = processes.free_port()
            log = tmp / "serve.log"
            procs["serve"] = (processes.spawn_api(env, port, log), log)
            url = f"http://127.0.0.1:{port}"
            wait_ready(url, procs)
            if "worker" in procs:
                # /readyz of an API that encodes locally does not wait for workers.
                wait_for_worker(settings, procs)
            hot = make_hot_store(settings)
            yield Target(url, {"Authorization": f"Bearer {key}"},
                         settings.queue.request_timeout_s + 30,
                         {name: proc.pid for name, (proc, _) in procs.items()}, hot.counters)
        finally:
            for proc, _ in procs.values():
                processes.stop(proc)


def wait_for_worker(settings: Settings,
                     procs: dict[str, tuple[subprocess.Popen[bytes], Path]]) -> None:
    """Until the worker this bench started beats for the model (its log if it exits)."""
    proc, log = procs["worker"]
    deadline = time.monotonic() + START_DEADLINE_S
    while not live_workers_serving(settings)[0]:
        if proc.poll() is not None:
            raise Unavailable(f"embedq worker exited ({proc.returncode}) while starting:"
                              f"\n{_tail(log)}")
        if time.monotonic() > deadline:
            raise Unavailable(f"the worker sent no heartbeat within {START_DEADLINE_S:.0f} s"
                              f"\n{_tail(log)}")
        time.sleep(0.3)


def wait_ready(url: str, procs: dict[str, tuple[subprocess.Popen[bytes], Path]]) -> None:
    """Until /readyz answers 200 (hot store, broker, database, a live worker for the
    model); a started process that exits, or the deadline, ends the bench with its log."""
    deadline = time.monotonic() + START_DEADLINE_S
    last = "no answer yet"
    while time.monotonic() < deadline:
        for name, (proc, log) in procs.items():
            if proc.poll() is not None:
                raise Unavailable(f"embedq {name} exited ({proc.returncode}) while starting:"
                                  f"\n{_tail(log)}")
        try:
            resp = httpx.get(url + "/readyz", timeout=5)
            if resp.status_code == 200:
                return
            last = f"{resp.status_code} {resp.text[:500]}"
        except httpx.HTTPError as exc:
            last = str(exc) or type(exc).__name__
        time.sleep(0.3)
    logs = "".join(f"\n--- {name}:\n{_tail(log)}" for name, (_, log) in procs.items())
    raise Unavailable(f"the server was not ready within {START_DEADLINE_S:.0f} s (/readyz: "
                      f"{last}){logs}")
