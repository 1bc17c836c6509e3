"""Errors in text-embeddings-inference's shape, for the TEI routes (tei.py).

`{"error": str, "error_type": str}` with TEI's statuses: 413 Validation (too many or too
long inputs), 422 Validation (a value that is wrong), 424 Backend (the model failed on an
input), 429 Overloaded, 503 Unhealthy; 401 for a missing key, 403 for a missing scope.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel

from embedq.api.errors import AsciiJSONResponse, kind_of
from embedq.errors import (
    EmbeddingFailed,
    EmbeddingTimeout,
    EmbedqError,
    Forbidden,
    InputTooLarge,
    InvalidInput,
    MalformedRequest,
    Overloaded,
    RateLimited,
    Unauthorized,
    Unavailable,
    UpstreamError,
)


class TeiErrorBody(BaseModel):
    error: str
    error_type: str


def tei_status(exc: EmbedqError) -> tuple[int, str]:
    """TEI's status and error_type for an embedq exception, most specific first."""
    if isinstance(exc, Unauthorized):
        return 401, "Unauthorized"
    if isinstance(exc, Forbidden):
        return 403, "Forbidden"
    if isinstance(exc, InputTooLarge):
        return 413, "Validation"
    if isinstance(exc, MalformedRequest):
        return kind_of(exc).status, "Validation"  # 400 not JSON, 415 not sent as JSON
    if isinstance(exc, InvalidInput):
        return 422, "Validation"
    if isinstance(exc, Overloaded | RateLimited):
        return 429, "Overloaded"
    if isinstance(exc, Unavailable | EmbeddingTimeout):
        return 503, "Unhealthy"
    if isinstance(exc, EmbeddingFailed | UpstreamError):
        return 424, "Backend"
    return kind_of(exc).status, "Backend"


def tei_error_response(exc: EmbedqError) -> JSONResponse:
    status, error_type = tei_status(exc)
    headers: dict[str, str] = {}
    retry_after = getattr(exc, "retry_after_s", None) or kind_of(exc).retry_after_s
    if retry_after is not None:
        headers["Retry-After"] = str(int(retry_after))
    if isinstance(exc, Unauthorized):
        headers["WWW-Authenticate"] = "Bearer"
    return AsciiJSONResponse({"error": str(exc), "error_type": error_type},
                             status_code=status, headers=headers)


class TeiRoute(APIRoute):
    """Answers the embedq exceptions of its route, its dependencies (the API key)
    included, in TEI's error shape instead of the app's OpenAI shape (`render`, which the
    embedding routes' lane uses too)."""

    render = staticmethod(tei_error_response)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def tei_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except EmbedqError as exc:
                return tei_error_response(exc)

        return tei_handler


def tei_errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {status: {"model": TeiErrorBody, "description": "error in TEI's shape"}
            for status in statuses}
