"""Support for the API tests (no tests here): `embedq serve` as a real process on 127.0.0.1."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from embedq.testing.processes import free_port, wait_http
from embedq.testing.processes import stop as stop_process
from tests import support


class ApiServer:
    """An `embedq serve` process in its own process group, with its log in a file."""

    def __init__(self, env: dict[str, str], log_path: Path, *args: str) -> None:
        self.env = env
        self.log_path = log_path
        self.args = args
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60) -> ApiServer:
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "embedq.cli", "--loglevel", "info", "serve",
             "--host", "127.0.0.1", "--port", str(self.port), *self.args],
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

    def wait_ready(self, timeout_s: float = 30) -> ApiServer:
        """Wait for /readyz to answer 200: a worker's heartbeat is in the hot store (the
        session's shared worker beats every HEARTBEAT_S)."""
        try:
            wait_http(self.url + "/readyz", timeout_s)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}:\n{self.log()[-3000:]}") from exc
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
        with contextlib.suppress(Exception):
            self._log.close()

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class TcpProxy:
    """A TCP forwarder to a real server that a test can cut and restore: a database
    outage for the processes that connect through it, without touching the server."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.accepted = 0  # connections forwarded so far

    def start(self) -> TcpProxy:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def stop(self) -> None:
        """Refuse new connections and cut every open one."""
        with self._lock:
            if self._listener is not None:
                with contextlib.suppress(OSError):
                    self._listener.shutdown(socket.SHUT_RDWR)
                self._listener.close()
                self._listener = None
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._sockets.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets.update((client, upstream))
                self.accepted += 1
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
