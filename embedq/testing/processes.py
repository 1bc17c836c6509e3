"""Starting embedq processes (workers, API servers, the fake upstream) for benchmarks.

Each process runs in its own process group, logs to a file, and is stopped by its group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports. Each socket stays bound until all are chosen: ports
    asked one at a time may repeat (the kernel hands a released port out again), and a
    Redis Cluster of the tests once got one port for two nodes, so the second never
    started and the cluster never formed."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]


def spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    out = open(log, "ab")  # noqa: SIM115 - the child owns it
    return subprocess.Popen([sys.executable, *args], env=env, stdout=out,
                            stderr=subprocess.STDOUT, start_new_session=True)


def spawn_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return spawn(["-m", "embedq.cli", "--loglevel", "info", "worker"], env, log)


def spawn_api(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    return spawn(["-m", "embedq.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
                 env, log)


def spawn_fake_upstream(port: int, latency_ms: float, max_concurrency: int,
                        log: Path) -> subprocess.Popen[bytes]:
    return spawn(["-m", "embedq.testing.fake_upstream", "--port", str(port),
                  "--latency-ms", str(latency_ms), "--max-concurrency", str(max_concurrency)],
                 dict(os.environ), log)


def wait_http(url: str, timeout_s: float = 90, status: int = 200) -> None:
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        try:
            resp = httpx.get(url, timeout=2)
            if resp.status_code == status:
                return
            last = f"HTTP {resp.status_code}: {resp.text[:200]}"
        except httpx.HTTPError as exc:
            last = str(exc)
        time.sleep(0.2)
    raise RuntimeError(f"{url} not ready in {timeout_s}s ({last})")


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)
