"""`embedq serve`'s HTTP protocol: a response's head and body leave in one send.

uvicorn writes a response's status line and headers when the app starts the response and
its body when the app sends it, each straight to the socket: two `send` calls for every
one-text answer. The transport here holds one small write (the head) until the next write
joins it, or until the event loop's next turn sends it alone (a response whose body
comes later: a stream, Server-Sent Events). Only one small write is ever held, so a
large or streamed response meets the socket's back-pressure as before.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

# The most a held write may be: a response head is a few hundred bytes.
HOLD_MAX_BYTES = 8192


class JoiningTransport:
    """A transport whose small write waits for the next one to leave with it."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._held is None:
            if len(data) <= HOLD_MAX_BYTES and not self._transport.is_closing():
                self._held = bytes(data)
                self._loop.call_soon(self.flush)
                return
            self._transport.write(data)
            return
        held, self._held = self._held, None
        self._transport.write(held + bytes(data))

    def flush(self) -> None:
        """Send the held write, if any."""
        if self._held is not None:
            held, self._held = self._held, None
            if not self._transport.is_closing():
                self._transport.write(held)

    def writelines(self, data: Any) -> None:
        self.write(b"".join(data))

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + len(self._held or b"")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class JoiningHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol on a `JoiningTransport`."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # uvloop's transports implement asyncio's interface without subclassing it.
        super().connection_made(cast(asyncio.Transport, JoiningTransport(transport, self.loop)))
