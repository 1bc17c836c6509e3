"""POST /v1/embeddings: the OpenAI request and response shapes, answered by the service.

One request, top to bottom: read and check the body (limits, types, model and its tier
suffix such as `all-MiniLM-L6-v2:int8`, dimensions; token ids decoded to text,
api/token_ids.py),
count tokens with the model's tokenizer (refuse or flag inputs over the window), refuse
with 429 when the online queue is past EMBEDQ_MAX_ONLINE_DEPTH, hand the texts to the
request batcher (coalesced with concurrent requests), and answer in input order.
"""

from __future__ import annotations

import base64
from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from embedq import wire
from embedq.api.auth import KEYED, check_scope
from embedq.api.disconnect import CLIENT_CLOSED, embed_for_caller
from embedq.api.errors import error_responses
from embedq.api.schemas import (
    EmbeddingCall,
    EmbeddingResponse,
    parse_embedding_request,
    read_json_body,
    request_schema,
)
from embedq.api.state import ApiState, get_state
from embedq.config import Settings
from embedq.encoders.tokens import TokenCounter
from embedq.errors import EmbedqError, InvalidInput, Overloaded
from embedq.service import Outcome

TRUNCATED_HEADER = "X-Embedq-Truncated"
# Past these sizes, parsing, counting tokens and writing JSON leave the event loop for a
# thread.
_INLINE_BODY_BYTES = 256 * 1024
_INLINE_CHARS = 20_000
_INLINE_VECTORS = 32


def build_router(settings: Settings, dimension: int | None) -> APIRouter:
    """The route, its OpenAPI request schema stating this deployment's limits. It checks
    its caller's scope itself (auth.check_scope): included with no dependency."""
    router = APIRouter(tags=["embeddings"])

    @router.post(
        "/v1/embeddings",
        response_model=EmbeddingResponse,
        responses=error_responses(400, 401, 404, 413, 415, 422, 429, 503),
        summary="Embed a string or a list of strings (OpenAI-compatible)",
        openapi_extra={
            **KEYED,
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": request_schema(settings, dimension)}},
            },
        },
    )
    async def create_embeddings(request: Request) -> Response:
        check_scope(request, "embed")
        state = get_state(request)
        body = await request.body()
        if len(body) <= _INLINE_BODY_BYTES:
            call = _parse(request.headers.get("content-type"), body, state.settings)
        else:  # parsing (and decoding token ids) a large body takes milliseconds
            call = await run_in_threadpool(_parse, request.headers.get("content-type"), body,
                                           state.settings)
        request.state.inputs = len(call.texts)  # for the audit line (auth.py)
        # UnknownModel (404) names the served models; a `:int8` suffix picks the tier.
        served, tier = state.service.resolve(call.model)
        tokens = state.tokens_of(served)
        dimensions = resolve_dimensions(call.dimensions, tokens.dimension,
                                        state.settings.model.dimensions)
        raw_tokens = await count_tokens(tokens, call.texts)
        truncated = _over_window(raw_tokens, tokens.window, state.settings.model.truncate)
        await refuse_when_overloaded(state)
        # Counted (audit line, the key's texts a day) once the request is known valid.
        outcomes = await embed_for_caller(request, state.batcher, call.texts, dimensions,
                                          precision=tier, model=served.name,
                                          tokens=raw_tokens)
        if outcomes is None:
            return Response(status_code=CLIENT_CLOSED)
        raise_first_failure(outcomes)
        if truncated:
            state.metrics.truncated.inc(truncated)
        body = await _render(state, call, outcomes, raw_tokens, served.name, tokens.window)
        return Response(body, media_type="application/json",
                        headers={TRUNCATED_HEADER: str(truncated)})

    return router


def _parse(content_type: str | None, body: bytes, settings: Settings) -> EmbeddingCall:
    return parse_embedding_request(read_json_body(content_type, body), settings)


# The steps below are shared with the other embedding routes (tei.py).
def resolve_dimensions(requested: int | None, native: int | None, default: int | None
                       ) -> int | None:
    """The spec's dimensions: None for the native width (one fingerprint, not two),
    unless the deployment's default is narrower: then the native width is asked for by
    number, so that None (the deployment's default) does not answer it."""
    if requested is None or native is None:
        return requested
    if requested > native:
        raise InvalidInput(
            f"dimensions={requested} is wider than the model's {native}: send a value from "
            f"1 to {native}, or omit it for the full width",
            "dimensions",
        )
    return None if requested == native and default is None else requested


async def count_tokens(tokens: TokenCounter, texts: list[str]) -> list[int]:
    if sum(map(len, texts)) <= _INLINE_CHARS:
        return tokens.raw_tokens(texts)
    return await run_in_threadpool(tokens.raw_tokens, texts)


async def refuse_when_overloaded(state: ApiState) -> None:
    """Overloaded (429) when the online queue is past EMBEDQ_MAX_ONLINE_DEPTH."""
    depth = await state.depth.online()
    if depth > state.settings.api.max_online_depth:
        raise Overloaded(
            f"{depth} online messages are queued, over EMBEDQ_MAX_ONLINE_DEPTH="
            f"{state.settings.api.max_online_depth}: retry after the Retry-After seconds",
            retry_after_s=1,
        )


def _over_window(raw_tokens: list[int], window: int | None, truncate: bool) -> int:
    """How many inputs are over the window; InvalidInput naming them when truncation is off."""
    if window is None:
        return 0
    over = [(i, n) for i, n in enumerate(raw_tokens) if n > window]
    if over and not truncate:
        i, n = over[0]
        more = f" ({len(over)} inputs in all)" if len(over) > 1 else ""
        raise InvalidInput(
            f"input[{i}] has {n} tokens, over the model's window of {window}{more}: shorten "
            "it, or run the server with EMBEDQ_TRUNCATE=true to embed its first tokens",
            "input",
        )
    return len(over)


def raise_first_failure(outcomes: list[Outcome]) -> None:
    for i, outcome in enumerate(outcomes):
        if outcome.error is not None:
            error: EmbedqError = outcome.error
            raise type(error)(f"input[{i}]: {error}") from error


async def _render(
    state: ApiState, call: EmbeddingCall, outcomes: list[Outcome], raw_tokens: list[int],
    default: str, window: int | None,
) -> bytes:
    used = sum(min(n, window) if window is not None else n for n in raw_tokens)
    model = call.model or default  # echo what was asked, tier suffix included
    if len(outcomes) <= _INLINE_VECTORS:
        return _json_body(outcomes, call.encoding_format, model, used)
    return await run_in_threadpool(_json_body, outcomes, call.encoding_format, model, used)


def _json_body(outcomes: list[Outcome], encoding_format: str, model: str, tokens: int) -> bytes:
    data: list[dict[str, Any]] = []
    for i, outcome in enumerate(outcomes):
        assert outcome.vector is not None
        vector = outcome.vector
        embedding: Any
        if encoding_format == "base64":
            embedding = base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
        else:
            embedding = vector
        data.append({"object": "embedding", "index": i, "embedding": embedding})
    body = {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
    return wire.dumps(body)
