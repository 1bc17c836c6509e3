"""Exceptions to HTTP at the edge, in one table, answered in the OpenAI error shape.

Every error response of the API is

    {"error": {"message": str, "type": str, "param": str | null, "code": str}}

with a message that says what to change. `ERROR_TABLE` maps embedq's exception tree to a
status, an error type and a code, most specific first; retryable kinds carry Retry-After.
Framework errors (unknown route, wrong method, a router's own validation) are answered in
the same shape. Other routers reuse this by raising embedq exceptions: `install_handlers`
covers the whole app.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from embedq.errors import (
    ConfigError,
    DailyLimitReached,
    EmbeddingFailed,
    EmbeddingTimeout,
    EmbedqError,
    Forbidden,
    InputTooLarge,
    InvalidInput,
    LimitReached,
    MalformedRequest,
    NotFound,
    Overloaded,
    QueueLimitReached,
    RateLimited,
    Unauthorized,
    Unavailable,
    UnknownModel,
    UnsupportedMediaType,
    UpstreamError,
)
from embedq.semantic.feedback import FeedbackConflict
from embedq.semantic.store import NamespaceLimitReached

log = logging.getLogger("embedq.api")


@dataclass(frozen=True)
class ErrorKind:
    status: int
    type: str
    code: str
    retry_after_s: int | None = None  # default Retry-After; an exception's own value wins


ERROR_TABLE: tuple[tuple[type[EmbedqError], ErrorKind], ...] = (
    (Unauthorized, ErrorKind(401, "authentication_error", "invalid_api_key")),
    (Forbidden, ErrorKind(403, "permission_error", "missing_scope")),
    (UnknownModel, ErrorKind(404, "invalid_request_error", "model_not_found")),
    (InputTooLarge, ErrorKind(413, "invalid_request_error", "input_too_large")),
    # 409: the request is valid, the server's state (namespaces at the cap) refuses it
    # until a namespace is deleted; retrying as is cannot help, so neither 429 nor 422.
    (NamespaceLimitReached, ErrorKind(409, "invalid_request_error", "namespace_limit")),
    # 409: a hit's verdict is final; the other verdict contradicts the recorded one
    (FeedbackConflict, ErrorKind(409, "invalid_request_error", "feedback_conflict")),
    # The same for the tenant's other caps (entries): delete some, or raise the setting.
    (LimitReached, ErrorKind(409, "invalid_request_error", "limit_reached")),
    (UnsupportedMediaType, ErrorKind(415, "invalid_request_error", "unsupported_media_type")),
    (MalformedRequest, ErrorKind(400, "invalid_request_error", "malformed_request")),
    (InvalidInput, ErrorKind(422, "invalid_request_error", "invalid_input")),
    (NotFound, ErrorKind(404, "not_found_error", "not_found")),
    (Overloaded, ErrorKind(429, "rate_limit_error", "overloaded", 1)),
    # Retry-After: the next UTC day (the exception's own), or a guess at when some of the
    # tenant's queued job inputs will have run.
    (DailyLimitReached, ErrorKind(429, "rate_limit_error", "daily_limit_exceeded")),
    (QueueLimitReached, ErrorKind(429, "rate_limit_error", "queue_limit_exceeded", 60)),
    (RateLimited, ErrorKind(429, "rate_limit_error", "rate_limit_exceeded", 1)),
    (Unavailable, ErrorKind(503, "service_unavailable", "unavailable", 5)),
    (EmbeddingTimeout, ErrorKind(503, "timeout_error", "embedding_timeout", 1)),
    (EmbeddingFailed, ErrorKind(422, "invalid_request_error", "embedding_failed")),
    (UpstreamError, ErrorKind(502, "upstream_error", "upstream_failed", 5)),
    (ConfigError, ErrorKind(500, "server_error", "misconfigured")),
    (EmbedqError, ErrorKind(500, "server_error", "internal_error")),
)

_HTTP_TYPES = {
    401: ("authentication_error", "invalid_api_key"),
    404: ("not_found_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    413: ("invalid_request_error", "input_too_large"),
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for these statuses, each in the error shape."""
    from embedq.api.schemas import ErrorBody

    described = {status: kind.code for _, kind in reversed(ERROR_TABLE)
                 for status in [kind.status]}
    described.update({status: code for status, (_, code) in _HTTP_TYPES.items()})
    return {
        status: {"model": ErrorBody, "description": described.get(status, "error")}
        for status in statuses
    }


def kind_of(exc: EmbedqError) -> ErrorKind:
    for cls, kind in ERROR_TABLE:
        if isinstance(exc, cls):
            return kind
    raise AssertionError("EmbedqError is the last row of ERROR_TABLE")


def error_response(
    status: int,
    message: str,
    type_: str,
    code: str,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {
        "error": {"message": message, "type": type_, "param": param, "code": code}
    }
    if extra:
        body.update(extra)
    return AsciiJSONResponse(body, status_code=status, headers=headers)


class AsciiJSONResponse(JSONResponse):
    """JSON with every non-ASCII character escaped: a message may quote what the client
    sent, and a lone surrogate quoted there cannot be encoded as UTF-8."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False,
                          separators=(",", ":")).encode("ascii")


# How a path answers an embedq error: this module's OpenAI shape, or TEI's (tei_errors.py).
ErrorRenderer = Callable[[EmbedqError], JSONResponse]


def embedq_error_response(exc: EmbedqError) -> JSONResponse:
    """The response for one embedq exception, as ERROR_TABLE says."""
    kind = kind_of(exc)
    headers: dict[str, str] = {}
    retry_after = getattr(exc, "retry_after_s", None) or kind.retry_after_s
    if retry_after is not None:
        headers["Retry-After"] = str(int(retry_after))
    if isinstance(exc, Unauthorized):
        headers["WWW-Authenticate"] = "Bearer"
    if kind.status >= 500:
        log.warning("answering %d: %s: %s", kind.status, type(exc).__name__, exc)
    return error_response(
        kind.status, str(exc), kind.type, kind.code, getattr(exc, "param", None), headers
    )


def validation_message(errors: list[dict[str, Any]]) -> tuple[str, str | None]:
    """One readable sentence and the offending parameter from pydantic's error list."""
    if not errors:
        return "the request is not valid", None
    first = errors[0]
    loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
    param = loc[0] if loc else None
    for part in loc[1:]:
        param = f"{param}[{part}]" if part.isdigit() else f"{param}.{part}"
    msg = str(first.get("msg", "invalid value"))
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return (f"{param}: {msg}{more}" if param else f"{msg}{more}"), param


async def _on_embedq_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, EmbedqError)
    return embedq_error_response(exc)


async def _on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    message, param = validation_message(list(exc.errors()))
    return error_response(422, message, "invalid_request_error", "invalid_input", param)


async def _on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    type_, code = _HTTP_TYPES.get(
        exc.status_code,
        ("invalid_request_error" if exc.status_code < 500 else "server_error", "http_error"),
    )
    message = str(exc.detail)
    if exc.status_code == 400 and message == _FASTAPI_PARSE_ERROR:
        # FastAPI's answer to a body its JSON parser gave up on (RecursionError included).
        message = ("the body could not be parsed: it is not JSON, or it is nested too "
                   "deeply; send a JSON object as /docs shows, nested a few levels at most")
    elif exc.status_code == 404:
        message = f"no route {request.method} {request.url.path}: see /docs for the routes"
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}: see /docs"
    return error_response(exc.status_code, message, type_, code, None, exc.headers)


_FASTAPI_PARSE_ERROR = "There was an error parsing the body"


async def _on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(
        500, "internal error; the server log has the details, and retrying may help",
        "server_error", "internal_error",
    )


def install_handlers(app: FastAPI) -> None:
    app.add_exception_handler(EmbedqError, _on_embedq_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    app.add_exception_handler(Exception, _on_unexpected)
