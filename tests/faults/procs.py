"""Processes a fault scenario kills: its own Redis server, and helpers shared by scenarios.

Every process is a child started in its own session and killed by pid or process group,
never by name; the machine's shared Redis and Postgres are never touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from embedq.testing.processes import free_port
from tests import support


class RedisServer:
    """`redis-server` on a free port with nothing on disk: a restart comes back empty."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 15) -> RedisServer:
        import redis

        binary = shutil.which("redis-server")
        if binary is None:
            support.require("redis-server", FileNotFoundError("redis-server not on PATH"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [str(binary), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.workdir), "--protected-mode", "no"],
            stdout=(self.workdir / "redis.log").open("ab"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.RedisError):
                if client.ping():
                    return self
            time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} did not answer in {timeout_s}s")

    def set_maxmemory(self, limit: str) -> None:
        """`CONFIG SET maxmemory` (e.g. "1" to refuse every write now, "0" for none):
        with the default policy, noeviction, Redis past it refuses every write and evicts
        nothing: Redis out of memory, as a production Redis at its limit answers."""
        import redis

        client = redis.Redis.from_url(self.url, socket_connect_timeout=2)
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", limit)

    def kill(self) -> None:
        """SIGKILL by pid: every key, queued message and claim is gone."""
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=15)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()


# The scenarios import it from here; it lives in tests.support for every test.
wait_until = support.wait_until


_COST = re.compile(r"batch done texts=(\d+) .* cost_ms=([0-9.]+)")


def batch_costs_s(log: Path) -> list[float]:
    """Seconds each batch took, from a worker log's `batch done` lines."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return [float(m.group(2)) / 1000 for m in _COST.finditer(text)]


def reset_peak_rss(pid: int) -> None:
    """Restart the process's peak resident set (VmHWM) from its resident set now, so a
    later peak measures what happened after this call only (Linux `clear_refs` 5)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def peak_rss_bytes(pid: int) -> int:
    """The process's peak resident set (VmHWM) since it started or `reset_peak_rss`."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM for pid {pid}")
