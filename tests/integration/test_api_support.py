"""Support for the API tests (no tests here): `embedq serve` as a real process on 127.0.0.1."""

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

from tests import support


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ApiServer:
    """An `embedq serve` process in its own process group, with its log in a file."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.env = env
        self.log_path = log_path
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60) -> ApiServer:
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "embedq.cli", "--loglevel", "info", "serve",
             "--host", "127.0.0.1", "--port", str(self.port)],
            env=self.env, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True, cwd=support.ROOT,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"embedq serve exited early:\n{self.log()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return self
            time.sleep(0.1)
        raise RuntimeError(f"embedq serve not up in {timeout_s}s:\n{self.log()[-3000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=15)
        with contextlib.suppress(Exception):
            self._log.close()
