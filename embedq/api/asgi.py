"""Small ASGI pieces the middlewares share."""

from __future__ import annotations

from starlette.types import Message, Send


class StatusRecorder:
    """A `send` that remembers the response status it passed on; 500 until the app starts
    a response (what an app that raised before answering is counted as)."""

    def __init__(self, send: Send) -> None:
        self.status = 500
        self._send = send

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
        await self._send(message)
