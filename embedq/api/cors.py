"""CORS for the browser origins of EMBEDQ_CORS_ORIGINS (none by default): Starlette's
CORSMiddleware, in front of the key check, for those origins only.

A browser's preflight (OPTIONS with `Origin` and `Access-Control-Request-Method`) carries
no key: from an allowed origin it is answered here, before the key check. A request from
any other origin passes through untouched, exactly as with CORS off: no CORS header at
all (Starlette would add its exposed headers to every answer, and answer a refused
preflight with its allowed methods), and a preflight meets the key check (401).
Credentials (cookies) are never allowed: keys travel in `Authorization`, which a page
must send itself.
"""

from __future__ import annotations

from collections.abc import Collection

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

EXPOSED = ("Retry-After", "Location", "X-Embedq-Truncated")


class OriginsCORS:
    """CORS headers and preflight answers for `origins` (`*`: any), nothing for others."""

    def __init__(self, app: ASGIApp, origins: Collection[str]) -> None:
        self.app = app
        self.cors = CORSMiddleware(app, allow_origins=tuple(origins),
                                   allow_methods=("GET", "POST", "DELETE"),
                                   allow_headers=("*",), expose_headers=EXPOSED)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        origin = Headers(scope=scope).get("origin") if scope["type"] == "http" else None
        if origin is not None and self.cors.is_allowed_origin(origin):
            await self.cors(scope, receive, send)
        else:
            await self.app(scope, receive, send)
