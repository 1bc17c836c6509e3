"""A lean HTTP/1.1 load generator for benchmarks: keep-alive connections over asyncio.

A general-purpose async client spends several milliseconds of CPU per request, which on
a small machine measures the client instead of the server. This one writes a request and
reads a Content-Length response (or a chunked one) on a persistent connection, nothing
more.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit


class Connection:
    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.path = parts.path or "/"
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self.headers: dict[str, str] = {}  # the last response's, names in lower case

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._reader is None or self._writer is None or self._writer.is_closing():
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        return self._reader, self._writer

    async def post_json(self, body: Any, headers: dict[str, str] | None = None,
                        path: str | None = None) -> tuple[int, bytes]:
        """POST to `path` (default: the connection's URL's), on the same connection."""
        data = json.dumps(body).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = (f"POST {path or self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n{extra}\r\n")
        reader, writer = await self._open()
        writer.write(head.encode() + data)
        await writer.drain()
        status_line = await reader.readline()
        status = int(status_line.split()[1])
        length = -1
        chunked = False
        close = False
        self.headers = {}
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            name = name.strip().lower()
            self.headers[name] = value.strip()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
            elif name == "connection" and "close" in value.lower():
                close = True
        if chunked:
            payload = b""
            while True:
                size = int((await reader.readline()).strip(), 16)
                if size == 0:
                    await reader.readline()
                    break
                payload += await reader.readexactly(size)
                await reader.readline()
        else:
            payload = await reader.readexactly(length) if length >= 0 else await reader.read()
        if close:
            writer.close()
            self._reader = self._writer = None
        return status, payload

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


async def fire(urls: list[str], bodies: list[Any], callers: int,
               on_response: Callable[[int, int, bytes, float], None] | None = None,
               headers: dict[str, str] | None = None) -> float:
    """Send each body once (to urls round-robin) from `callers` concurrent connections;
    return wall seconds. `on_response(index, status, payload, latency_s)` sees each answer."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(bodies)):
        queue.put_nowait(i)

    async def caller(n: int) -> None:
        conns = {u: Connection(u) for u in urls}
        try:
            while not queue.empty():
                i = queue.get_nowait()
                url = urls[i % len(urls)]
                t0 = time.perf_counter()
                status, payload = await conns[url].post_json(bodies[i], headers)
                if on_response is not None:
                    on_response(i, status, payload, time.perf_counter() - t0)
                if status >= 400:
                    raise RuntimeError(f"HTTP {status}: {payload[:200]!r}")
        finally:
            for c in conns.values():
                c.close()

    t0 = time.perf_counter()
    await asyncio.gather(*[caller(n) for n in range(callers)])
    return time.perf_counter() - t0
