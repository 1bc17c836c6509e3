"""A real HTTP receiver for job callbacks on 127.0.0.1, and the documented way to verify them.

`verify` is the snippet of docs/jobs.md ("Verifying a callback"), read from the file and
run as written, so the documentation a receiver copies is the code these tests trust.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests import support

SNIPPET = re.compile(r"#### Verifying a callback.*?```python\n(.*?)```", re.S)


def documented_verifier() -> Callable[..., bool]:
    """`verify_embedq_callback` exactly as docs/jobs.md shows it."""
    text = (support.ROOT / "docs" / "jobs.md").read_text(encoding="utf-8")
    match = SNIPPET.search(text)
    assert match, "docs/jobs.md lost its 'Verifying a callback' snippet"
    namespace: dict[str, Any] = {}
    exec(compile(match.group(1), "docs/jobs.md", "exec"), namespace)
    verifier: Callable[..., bool] = namespace["verify_embedq_callback"]
    return verifier


@dataclass(frozen=True)
class Delivery:
    at: float  # time.monotonic() on arrival
    delivery_id: str
    signature: str
    body: bytes
    answered: int


class Receiver:
    """Answers each POST with `status` (settable while it runs) and records it."""

    def __init__(self, port: int | None = None, status: int = 200) -> None:
        self.status = status
        self.deliveries: list[Delivery] = []
        self.arrived = 0  # requests read, answered or still held by `release`
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.release.set()  # cleared: requests wait for it (a slow receiver)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.lock:
                    receiver.arrived += 1
                receiver.release.wait(30)
                status = receiver.status
                with receiver.lock:
                    receiver.deliveries.append(Delivery(
                        time.monotonic(), self.headers.get("X-Embedq-Delivery", ""),
                        self.headers.get("X-Embedq-Signature", ""), body, status))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port or 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        port: int = self.server.server_address[1]
        return port

    def url(self, path: str = "/hooks/embedq") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def got(self, status: int | None = None) -> list[Delivery]:
        with self.lock:
            return [d for d in self.deliveries if status is None or d.answered == status]

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
