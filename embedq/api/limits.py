"""The request body limit, enforced while the body streams in (EMBEDQ_MAX_BODY_BYTES).

A declared Content-Length over the limit is refused before a byte is read; a body without
one (chunked) is counted as it arrives, and the first chunk past the limit ends the
request with 413. The middleware wraps the whole app, so every router (jobs, semantic
cache) gets the same limit without doing anything; a path prefix may have a limit of its
own (`path_limits`: file uploads, EMBEDQ_MAX_FILE_BYTES).
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from embedq.api.errors import embedq_error_response
from embedq.errors import InputTooLarge, MalformedRequest


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_body_bytes: int,
                 path_limits: Mapping[str, tuple[int, str]] | None = None) -> None:
        """`path_limits`: path prefix -> (limit, the setting that sets it)."""
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.path_limits = dict(path_limits or {})

    def _limit(self, path: str) -> tuple[int, str]:
        for prefix, limit in self.path_limits.items():
            if path.startswith(prefix):
                return limit
        return self.max_body_bytes, "EMBEDQ_MAX_BODY_BYTES"

    def _too_large(self, path: str, declared: int | None = None) -> InputTooLarge:
        size = f"{declared} bytes" if declared is not None else "the body"
        limit, setting = self._limit(path)
        return InputTooLarge(
            f"{size} is over the limit of {limit} bytes per request "
            f"({setting}): send fewer or shorter inputs per request, or a bulk job",
            "body",
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        max_bytes = self._limit(path)[0]
        declared = _content_length(scope)
        if declared == -1:
            response = embedq_error_response(
                MalformedRequest("the Content-Length header is not a non-negative integer")
            )
            await response(scope, receive, send)
            return
        if declared is not None and declared > max_bytes:
            await embedq_error_response(self._too_large(path, declared))(scope, receive, send)
            return

        received = 0
        tripped = False
        replaced = False

        async def counting_receive() -> Message:
            nonlocal received, tripped
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > max_bytes:
                    tripped = True
                    raise self._too_large(path)
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal replaced
            if not tripped:
                await send(message)
                return
            # Whatever the app made of the aborted read (a router may turn it into a 400),
            # the answer is our 413, sent once.
            if message["type"] == "http.response.start" and not replaced:
                replaced = True
                await embedq_error_response(self._too_large(path))(scope, receive, send)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except InputTooLarge:
            if not tripped:
                raise
            if not replaced:
                replaced = True
                await embedq_error_response(self._too_large(path))(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    """The declared body size; None when absent, -1 when it is not a number."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            raw = value.decode("latin-1").strip()
            return int(raw) if raw.isdigit() else -1
    return None
