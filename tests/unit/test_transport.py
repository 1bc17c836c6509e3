"""`embedq serve`'s transport (embedq/api/transport.py): a response's head and body leave
in one write; a lone head, a stream, a large body and a closing connection arrive whole."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from embedq.api.transport import HOLD_MAX_BYTES, JoiningHttpToolsProtocol, JoiningTransport
from embedq.cli.serve import uvicorn_options
from tests import support


class Recorded:
    """A real transport whose writes are also kept, to count them."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self.transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


class Sink(asyncio.Protocol):
    """The far end of the connection: what arrived, and whether the sender closed."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.closed = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.data += data

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


@contextlib.asynccontextmanager
async def connected() -> AsyncIterator[tuple[JoiningTransport, Recorded, Sink]]:
    """A JoiningTransport over a real loopback connection, and the far end."""
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    sink = Sink()
    await loop.connect_accepted_socket(lambda: sink, theirs)
    transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
    recorded = Recorded(transport)
    try:
        yield JoiningTransport(recorded, loop), recorded, sink  # type: ignore[arg-type]
    finally:
        transport.close()


async def arrived(sink: Sink, size: int) -> bytes:
    for _ in range(200):
        if len(sink.data) >= size:
            break
        await asyncio.sleep(0.005)
    return bytes(sink.data)


def test_a_head_and_its_body_leave_in_one_write() -> None:
    async def go() -> None:
        async with connected() as (joining, recorded, sink):
            joining.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
            joining.write(b"{}")
            assert recorded.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
            assert await arrived(sink, 41) == recorded.writes[0]
            await asyncio.sleep(0)  # the turn's flush finds nothing held
            assert len(recorded.writes) == 1

    asyncio.run(go())


def test_a_lone_write_leaves_on_the_next_turn() -> None:
    async def go() -> None:
        async with connected() as (joining, recorded, sink):
            joining.write(b"event: progress\n\n")
            assert recorded.writes == []
            await asyncio.sleep(0)
            assert recorded.writes == [b"event: progress\n\n"]
            assert await arrived(sink, 17) == b"event: progress\n\n"

    asyncio.run(go())


def test_a_large_write_is_never_held() -> None:
    async def go() -> None:
        async with connected() as (joining, recorded, sink):
            big = b"x" * (HOLD_MAX_BYTES + 1)
            joining.write(big)
            assert recorded.writes == [big]
            joining.write(b"head")
            joining.write(big)  # a held head goes with the large write after it
            assert recorded.writes == [big, b"head" + big]
            assert await arrived(sink, 2 * len(big) + 4) == big + b"head" + big

    asyncio.run(go())


def test_writelines_and_write_eof_keep_the_order() -> None:
    async def go() -> None:
        async with connected() as (joining, recorded, sink):
            joining.write(b"head ")
            joining.writelines([b"body ", b"more"])
            joining.write(b" last")
            joining.write_eof()
            await asyncio.wait_for(sink.closed, 5)
            assert bytes(sink.data) == b"head body more last"
            assert recorded.writes == [b"head body more", b" last"]

    asyncio.run(go())


def test_close_sends_what_is_held_and_abort_drops_it() -> None:
    async def go() -> None:
        async with connected() as (joining, recorded, sink):
            joining.write(b"last words")
            joining.close()
            await asyncio.wait_for(sink.closed, 5)
            assert bytes(sink.data) == b"last words"
        async with connected() as (joining, recorded, sink):
            joining.write(b"never sent")
            joining.abort()
            await asyncio.wait_for(sink.closed, 5)
            await asyncio.sleep(0)
            assert recorded.writes == [] and bytes(sink.data) == b""
            assert joining.get_write_buffer_size() == 0

    asyncio.run(go())


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """A plain JSON answer, a stream whose parts come apart in time, a large body."""
    assert scope["type"] == "http"
    path = scope["path"]
    if path == "/stream":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        for n in range(3):
            await asyncio.sleep(0.02)
            await send({"type": "http.response.body", "body": f"data: {n}\n\n".encode(),
                        "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    body = b"y" * 1_000_000 if path == "/big" else json.dumps({"path": path}).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


@contextlib.contextmanager
def served() -> Iterator[int]:
    """`app` under uvicorn with embedq serve's protocol, on a free loopback port."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                           http=JoiningHttpToolsProtocol))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    support.wait_until(lambda: server.started, 30, "the server starting")
    try:
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _get(sock: socket.socket, path: str) -> tuple[bytes, bytes]:
    """(head, body) of one keep-alive GET on `sock`; the body by its length or chunks."""
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: test\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" in head:
        while not rest.endswith(b"0\r\n\r\n"):
            rest += sock.recv(65536)
        body = b""
        while True:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line, 16)
            if size == 0:
                return head, body
            body, rest = body + rest[:size], rest[size + 2:]
    length = int(head.split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(rest) < length:
        rest += sock.recv(65536)
    return head, rest


def test_uvicorn_serves_whole_answers_on_it() -> None:
    with served() as port, socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        for path in ("/one", "/stream", "/big", "/two"):  # one connection, kept alive
            head, body = _get(sock, path)
            assert head.startswith(b"HTTP/1.1 200 OK"), head
            if path == "/stream":
                assert body == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"
            elif path == "/big":
                assert body == b"y" * 1_000_000
            else:
                assert json.loads(body) == {"path": path}


def test_embedq_serve_runs_uvicorn_on_it() -> None:
    args = argparse.Namespace(host="127.0.0.1", port=8000, workers=1, loglevel="warning")
    options = uvicorn_options(args)
    assert options["http"] is JoiningHttpToolsProtocol
    assert options["app"] == "embedq.api.app:create_app" and options["factory"] is True


@pytest.mark.parametrize("size", [HOLD_MAX_BYTES, HOLD_MAX_BYTES + 1])
def test_the_hold_limit(size: int) -> None:
    async def go() -> None:
        async with connected() as (joining, recorded, _):
            joining.write(b"z" * size)
            assert len(recorded.writes) == (0 if size <= HOLD_MAX_BYTES else 1)

    asyncio.run(go())
