"""Test support: real servers, real worker processes, and honest skips.

A test that needs a server skips only when the server is absent and `CI` is unset; with
`CI` set it fails. Worker processes are started in their own process group so a test can
SIGKILL the whole group (never by name).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from embedq.testing.processes import free_port
from embedq.testing.processes import stop as stop_process

ROOT = Path(__file__).resolve().parents[1]
CI = bool(os.environ.get("CI"))


def _session_redis_url(base: str, xdist_worker: str | None) -> str:
    """The session's Redis db: `base`'s, plus the xdist worker's number under `make test`'s
    parallel run (gw0 keeps it, gw1 takes the next), so sessions never flush each other."""
    if not xdist_worker:
        return base
    head, _, db = base.rpartition("/")
    number = int(db or 0) + int(xdist_worker.removeprefix("gw"))
    if number > 15:
        raise RuntimeError(f"EMBEDQ_TEST_REDIS_URL={base} leaves no Redis db for xdist "
                           f"worker {xdist_worker}: give a lower db number (the suite takes "
                           "one per worker)")
    return f"{head}/{number}"


def _scratch_redis_url(base: str, xdist_worker: str | None) -> str:
    """The db the hot store's own tests flush as they go: below `base`'s (gw0 the one under
    it, gw1 the next down), never the session's, whose worker heartbeats into it for the
    whole session (a flush there left /readyz without a live worker for up to 5 s)."""
    head, _, db = base.rpartition("/")
    number = int(db or 0) - 1 - int((xdist_worker or "gw0").removeprefix("gw"))
    if number < 0:
        raise RuntimeError(f"EMBEDQ_TEST_REDIS_URL={base} leaves no Redis db below it for "
                           "the hot store's tests to flush: give a higher db number")
    return f"{head}/{number}"


_BASE_REDIS_URL = os.environ.get("EMBEDQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/13")
REDIS_URL = _session_redis_url(_BASE_REDIS_URL, os.environ.get("PYTEST_XDIST_WORKER"))
SCRATCH_REDIS_URL = _scratch_redis_url(_BASE_REDIS_URL, os.environ.get("PYTEST_XDIST_WORKER"))
PG_ADMIN_URL = os.environ.get(
    "EMBEDQ_TEST_POSTGRES_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str,
               interval_s: float = 0.05) -> float:
    """Poll until `predicate()`; return the seconds it took, or fail naming `what`."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"{what} did not happen within {timeout_s}s")
        time.sleep(interval_s)
    return time.monotonic() - started


def require(what: str, error: BaseException) -> None:
    """Skip on a laptop without the server; fail in CI, where it must be there."""
    message = f"{what} is not reachable ({error})"
    if CI:
        pytest.fail(message + "; CI must provide it (see .ci/run)")
    pytest.skip(message + "; start it or set CI=1 to make this a failure")


def check_redis(url: str = REDIS_URL) -> None:
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except Exception as exc:
        require("Redis", exc)


def check_postgres(url: str = PG_ADMIN_URL) -> None:
    import psycopg

    try:
        psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"),
                        connect_timeout=3).close()
    except Exception as exc:
        require("PostgreSQL", exc)


@contextlib.contextmanager
def temporary_database(admin_url: str = PG_ADMIN_URL) -> Iterator[str]:
    """A fresh Postgres database migrated to head; dropped afterwards."""
    import psycopg

    from embedq.models import migrate

    name = f"embedq_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = admin_url.rsplit("/", 1)[0] + f"/{name}"
    migrate.upgrade(url)
    try:
        yield url
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


def cluster_env(redis_url: str, database_url: str, **extra: Any) -> dict[str, str]:
    """Environment for a process of a test cluster (worker, API, producer)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDQ_")}
    env.update(
        {
            "EMBEDQ_BROKER_URL": redis_url,
            "EMBEDQ_REDIS_URL": redis_url,
            "EMBEDQ_DATABASE_URL": database_url,
            "EMBEDQ_ENCODER": "faulty",
            "HF_HUB_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update({f"EMBEDQ_{k.upper()}": str(v) for k, v in extra.items()})
    return env


def settings_from(env: dict[str, str]) -> Any:
    from embedq.config import Settings

    return Settings.from_env({k: v for k, v in env.items() if k.startswith("EMBEDQ_")})


_CONSUMER_READY = re.compile(rb"@\S+ ready\.")


class WorkerProcess:
    """An `embedq worker` in its own process group, with its log in a file."""

    def __init__(self, env: dict[str, str], log_path: Path, *args: str) -> None:
        self.env = env
        self.log_path = log_path
        self.args = args
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60) -> WorkerProcess:
        from embedq.coordination.redis_store import RedisHotStore

        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        offset = self._log.tell()  # a log reused across starts holds an older "ready."
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "embedq.cli", "--loglevel", "info", "worker", *self.args],
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=ROOT,
        )
        hot = RedisHotStore(self.env["EMBEDQ_REDIS_URL"])  # one Redis or a cluster
        deadline = time.monotonic() + timeout_s
        marker = f"-{self.proc.pid}"
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"worker exited early:\n{self.log_path.read_text()[-3000:]}")
                # Celery logs "<name>@<host> ready." once its consumer has started.
                log = self.log_path.read_bytes()[offset:]
                if (any(k.endswith(marker) for k in hot.live_workers())
                        and _CONSUMER_READY.search(log)):
                    return self
                time.sleep(0.1)
        finally:
            hot.close()
        tail = self.log_path.read_text()[-3000:]
        raise RuntimeError(f"worker not ready in {timeout_s}s:\n{tail}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
        with contextlib.suppress(Exception):
            self._log.close()


def text_digest(text: str) -> str:
    """How the faulty encoder's ledger names a text it encoded."""
    return hashlib.sha256(text.encode()).hexdigest()


def hashing_vector(text: str) -> Any:
    """The normalized vector the hashing (and faulty) encoder gives `text`."""
    from embedq.encoders.hashing import HashingEncoder

    raw = HashingEncoder().encode([text])[0]
    return raw / (raw ** 2).sum() ** 0.5


def ledger_counts(path: Path) -> dict[str, int]:
    """Forward passes per text digest, from the faulty encoder's ledger file."""
    counts: dict[str, int] = {}
    if path.exists():
        for line in path.read_text().split():
            counts[line] = counts.get(line, 0) + 1
    return counts


def flush_redis(url: str = REDIS_URL) -> None:
    import redis

    redis.Redis.from_url(url).flushdb()


class FakeUpstream:
    """The fake OpenAI-compatible upstream (embedq.testing.fake_upstream) as a process."""

    def __init__(self, latency_ms: float = 50, max_concurrency: int = 5) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "embedq.testing.fake_upstream", "--port", str(self.port),
             "--latency-ms", str(latency_ms), "--max-concurrency", str(max_concurrency)],
            start_new_session=True, cwd=ROOT,
        )
        import httpx

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/stats", timeout=1)
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("fake upstream did not start")

    def stats(self) -> dict[str, int]:
        import httpx

        data: dict[str, int] = httpx.get(f"http://127.0.0.1:{self.port}/stats").json()
        return data

    def faults(self, statuses: list[int] = [], hang_s: float = 0,  # noqa: B006
               float_only: bool = False) -> None:
        import httpx

        httpx.post(f"http://127.0.0.1:{self.port}/faults",
                   json={"statuses": statuses, "hang_s": hang_s, "float_only": float_only})

    def reset(self) -> None:
        import httpx

        httpx.post(f"http://127.0.0.1:{self.port}/reset")

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(timeout=10)


@contextlib.contextmanager
def semantic_caches(make: Callable[..., Any]) -> Iterator[Callable[..., Any]]:
    """Yields a function that opens a SemanticCache with `make(*args, **kwargs)` (each one a
    process-to-be), and closes every cache opened, and its service, on exit."""
    opened: list[Any] = []

    def open_(*args: Any, **kwargs: Any) -> Any:
        cache = make(*args, **kwargs)
        opened.append(cache)
        return cache

    try:
        yield open_
    finally:
        for cache in opened:
            cache.close(save=False)
            cache.service.close()
