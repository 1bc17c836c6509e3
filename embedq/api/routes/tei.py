"""Hugging Face text-embeddings-inference (TEI) routes beside the OpenAI ones.

GET /info, POST /embed (and POST /, where TEI clients such as huggingface_hub's
InferenceClient post), POST /tokenize and GET /health, in TEI's request and response
shapes, so that TEI clients (Dify's "Text Embedding Inference" provider, huggingface_hub,
LangChain's HuggingFaceEndpointEmbeddings) work unchanged. /embed takes the same path as
POST /v1/embeddings (token count, load shedding, the request batcher, the cache): the same
text gets the same fingerprint, so either route answers the other's vectors from cache.

TEI serves one model per URL: these routes serve the default model, unless a request
names another served model (or an alias, `:tier` included) in the `X-Embedq-Model` header.

Errors are TEI's `{"error": str, "error_type": str}` (tei_errors.py). Every route but
/health needs the API key like the other routes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from fastapi import APIRouter, Request, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from embedq import wire
from embedq.api.auth import KEYED, check_scope
from embedq.api.disconnect import CLIENT_CLOSED, embed_for_caller
from embedq.api.errors import AsciiJSONResponse
from embedq.api.routes.embeddings import (
    TRUNCATED_HEADER,
    count_tokens,
    raise_first_failure,
    refuse_when_overloaded,
    resolve_dimensions,
)
from embedq.api.routes.health import READY_RETRY_AFTER_S, readiness, sees_checks
from embedq.api.routes.tei_errors import TeiRoute, tei_errors
from embedq.api.schemas import parse_texts, read_json_body
from embedq.api.state import ApiState, get_state
from embedq.encoders.catalog import ServedModel
from embedq.encoders.tokens import Token, TooManyTokens
from embedq.errors import InputTooLarge, InvalidInput, MalformedRequest
from embedq.limits import MAX_TOKENIZE_TOKENS, check_dimensions, over
from embedq.service import Outcome
from embedq.version import __version__

# Past these sizes, tokenizing and writing JSON leave the event loop for a thread.
_INLINE_CHARS = 20_000
_INLINE_VECTORS = 32
MODEL_HEADER = "x-embedq-model"  # another served model than the default (docs/http-api.md)


# --- request parsing
@dataclass(frozen=True)
class EmbedCall:
    texts: list[str]
    normalize: bool
    truncate: bool
    truncate_left: bool
    dimensions: int | None


def _object(payload: Any, example: str) -> dict[str, Any]:
    if not isinstance(payload, dict):
        raise MalformedRequest(f"the body must be a JSON object such as {example}")
    return payload


def _flag(payload: dict[str, Any], name: str, default: bool) -> bool:
    value = payload.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidInput(f"{name} must be true or false, or omitted ({default})", name)
    return value


def _refuse_prompt_name(payload: dict[str, Any]) -> None:
    if payload.get("prompt_name") is not None:
        raise InvalidInput(
            "prompt_name is not supported: embedq embeds the text as sent; put the prompt "
            "text in front of each input yourself and send prompt_name null or omit it",
            "prompt_name",
        )


def parse_embed(payload: Any, state: ApiState) -> EmbedCall:
    body = _object(payload, '{"inputs": ["some text"]}')
    texts = parse_texts(body.get("inputs"), state.settings, "inputs")
    _refuse_prompt_name(body)
    direction = body.get("truncation_direction")
    if direction is None:
        direction = "right"
    if not isinstance(direction, str) or direction.lower() not in {"left", "right"}:
        raise InvalidInput(
            f"truncation_direction={direction!r} is not one of 'right' and 'left': send "
            "'right' (the default) or omit it", "truncation_direction",
        )
    dims = check_dimensions(body.get("dimensions"))
    return EmbedCall(texts, _flag(body, "normalize", True), _flag(body, "truncate", False),
                     direction.lower() == "left", dims)


def _check_window(call: EmbedCall, raw_tokens: list[int], window: int | None,
                  server_truncates: bool) -> int:
    """How many inputs will be truncated; InputTooLarge (413) when one is over the
    window and the request (or the server) does not allow truncation."""
    if window is None:
        return 0
    over = [(i, n) for i, n in enumerate(raw_tokens) if n > window]
    if not over:
        return 0
    i, n = over[0]
    more = f" ({len(over)} inputs in all)" if len(over) > 1 else ""
    if not call.truncate:
        raise InputTooLarge(
            f"inputs[{i}] has {n} tokens, over the model's max_input_length of {window}"
            f"{more}: shorten it, or send \"truncate\": true to embed its first {window} "
            "tokens", "inputs",
        )
    if not server_truncates:
        raise InputTooLarge(
            f"inputs[{i}] has {n} tokens, over the model's max_input_length of {window}"
            f"{more}, and this server refuses to truncate (EMBEDQ_TRUNCATE=false): "
            "shorten it", "inputs",
        )
    if call.truncate_left:
        raise InvalidInput(
            f"inputs[{i}] would be truncated on the left, which embedq's model cannot do "
            "(it keeps an input's first tokens): send \"truncation_direction\": \"right\" "
            "or shorten the input", "truncation_direction",
        )
    return len(over)


# --- responses
class EmbeddingModelInfo(BaseModel):
    pooling: str


class ModelTypeInfo(BaseModel):
    embedding: EmbeddingModelInfo


class Info(BaseModel):
    model_id: str
    served_model_name: str  # what to send as `model` on /v1/embeddings (GET /v1/models)
    model_sha: str | None
    model_dtype: str
    model_type: ModelTypeInfo
    max_concurrent_requests: int
    max_input_length: int | None
    max_batch_tokens: int
    max_batch_requests: int | None
    max_client_batch_size: int
    auto_truncate: bool
    tokenization_workers: int
    version: str
    sha: str | None = None
    docker_label: str | None = None


class SimpleToken(BaseModel):
    id: int
    text: str
    special: bool
    start: int | None
    stop: int | None


def served_of(request: Request, state: ApiState) -> tuple[ServedModel, str]:
    """The model and tier a TEI route serves: one model per URL, as TEI, the default
    unless the request names another served model (or alias, `:tier` included) in
    MODEL_HEADER; UnknownModel (404) for one not served."""
    return state.service.resolve(request.headers.get(MODEL_HEADER))


def _info(state: ApiState, served: ServedModel, tier: str) -> Info:
    settings, tokens = state.settings, state.tokens_of(served)
    window = tokens.window
    return Info(
        model_id=served.model,
        served_model_name=served.label(tier),
        model_sha=served.revisions[tier],
        model_dtype="float32",
        model_type=ModelTypeInfo(embedding=EmbeddingModelInfo(
            pooling=tokens.pooling or "unknown")),
        # TEI answers 429 past this many requests; embedq past this many queued messages.
        max_concurrent_requests=settings.api.max_online_depth,
        max_input_length=window,
        # Texts per coalesced service call, each at most the window.
        max_batch_tokens=settings.api.batch_max_texts * (window or 1),
        max_batch_requests=settings.api.batch_max_texts,
        max_client_batch_size=settings.api.max_inputs,
        auto_truncate=False,  # "truncate" defaults to false, as on a TEI without the flag
        tokenization_workers=1,  # each API process tokenizes inline
        version=__version__,
    )


def _vectors_json(outcomes: list[Outcome]) -> bytes:
    rows = []
    for outcome in outcomes:
        assert outcome.vector is not None
        rows.append(outcome.vector)
    return wire.dumps(rows)


def _tokens_json(tokens: list[list[Token]]) -> bytes:
    # orjson writes the dataclasses as they are, no dict per token: 30,400 tokens took
    # 13 ms and 3.8 MiB at peak, against 1.28 s and 10.3 MiB with asdict + json.dumps
    # (the same bytes).
    return orjson.dumps(tokens)


_STRINGS = {"anyOf": [{"type": "string", "minLength": 1},
                      {"type": "array", "items": {"type": "string", "minLength": 1},
                       "minItems": 1}]}
_EMBED_SCHEMA = {
    "title": "TeiEmbedRequest", "type": "object", "required": ["inputs"],
    "properties": {
        "inputs": _STRINGS,
        "normalize": {"type": ["boolean", "null"], "default": True},
        "truncate": {"type": ["boolean", "null"], "default": False},
        "truncation_direction": {"enum": ["right", "left", "Right", "Left", None],
                                 "default": "right"},
        "dimensions": {"type": ["integer", "null"], "minimum": 1},
        "prompt_name": {"type": "null", "description": "prompts are not supported"},
    },
}
_TOKENIZE_SCHEMA = {
    "title": "TeiTokenizeRequest", "type": "object", "required": ["inputs"],
    "properties": {
        "inputs": _STRINGS,
        "add_special_tokens": {"type": ["boolean", "null"], "default": True},
        "prompt_name": {"type": "null", "description": "prompts are not supported"},
    },
}


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True,
                            "content": {"application/json": {"schema": schema}}}}


router = APIRouter(tags=["text-embeddings-inference"], route_class=TeiRoute)
# POST /embed and POST /: they check their caller's scope themselves (auth.check_scope),
# so their router is included with no dependency.
embed_router = APIRouter(tags=["text-embeddings-inference"], route_class=TeiRoute)
# The paths answered in TEI's error shape, also by the key check in front of the app.
PATHS = ("/info", "/embed", "/", "/tokenize")


@router.get("/info", response_model=Info, responses=tei_errors(401),
            summary="The served model and limits (TEI)")
async def info(request: Request) -> Info:
    state = get_state(request)
    return _info(state, *served_of(request, state))


async def _embed(request: Request) -> Response:
    check_scope(request, "embed")
    state = get_state(request)
    payload = read_json_body(request.headers.get("content-type"), await request.body())
    call = parse_embed(payload, state)
    request.state.inputs = len(call.texts)  # for the audit line (auth.py)
    served, tier = served_of(request, state)
    tokens = state.tokens_of(served)
    dimensions = resolve_dimensions(call.dimensions, tokens.dimension,
                                    state.settings.model.dimensions)
    raw_tokens = await count_tokens(tokens, call.texts)
    truncated = _check_window(call, raw_tokens, tokens.window, state.settings.model.truncate)
    await refuse_when_overloaded(state)
    outcomes = await embed_for_caller(request, state.batcher, call.texts, dimensions,
                                      call.normalize, precision=tier, model=served.name,
                                      tokens=raw_tokens)
    if outcomes is None:
        return Response(status_code=CLIENT_CLOSED)
    raise_first_failure(outcomes)
    if truncated:
        state.metrics.truncated.inc(truncated)
    body = (_vectors_json(outcomes) if len(outcomes) <= _INLINE_VECTORS
            else await run_in_threadpool(_vectors_json, outcomes))
    headers = {TRUNCATED_HEADER: str(truncated),
               "x-compute-characters": str(sum(map(len, call.texts))),
               "x-compute-tokens": str(sum(raw_tokens))}
    return Response(body, media_type="application/json", headers=headers)


_EMBED_DOC: dict[str, Any] = {
    "responses": {200: {"content": {"application/json": {"schema": {
        "type": "array", "items": {"type": "array", "items": {"type": "number"}}}}}},
        **tei_errors(400, 401, 413, 415, 422, 424, 429, 503)},
    "openapi_extra": {**KEYED, **_body(_EMBED_SCHEMA)},
}
embed_router.add_api_route("/embed", _embed, methods=["POST"], response_class=Response,
                           summary="Embed inputs; one vector per input (TEI)", **_EMBED_DOC)
embed_router.add_api_route("/", _embed, methods=["POST"], response_class=Response,
                           include_in_schema=False)


@router.post("/tokenize", response_model=list[list[SimpleToken]],
             responses=tei_errors(400, 401, 413, 415, 422),
             summary="Each input's tokens with their offsets (TEI)",
             openapi_extra=_body(_TOKENIZE_SCHEMA))
async def tokenize(request: Request) -> Response:
    state = get_state(request)
    payload = read_json_body(request.headers.get("content-type"), await request.body())
    body = _object(payload, '{"inputs": ["some text"]}')
    texts = parse_texts(body.get("inputs"), state.settings, "inputs")
    _refuse_prompt_name(body)
    special = _flag(body, "add_special_tokens", True)
    limit = state.settings.api.max_tokenize_tokens

    def render() -> bytes:
        try:
            return _tokens_json(state.tokens.tokenize(texts, special, max_tokens=limit))
        except TooManyTokens as exc:
            raise over(MAX_TOKENIZE_TOKENS, state.settings, exc.counted,
                       f"the first {exc.inputs} inputs", "send fewer or shorter inputs per "
                       "request", "inputs") from None

    out = render() if sum(map(len, texts)) <= _INLINE_CHARS else await run_in_threadpool(render)
    return Response(out, media_type="application/json")


health_router = APIRouter(tags=["text-embeddings-inference"])


@health_router.get("/health", summary="200 when the deployment can serve (TEI); no key",
                   responses={200: {"description": "healthy, empty body"},
                              **tei_errors(503)})
async def health(request: Request) -> Response:
    """The readiness rule of /readyz: hot store, broker, database and a live worker."""
    state = getattr(request.app.state, "embedq", None)
    if state is None:
        failed = ["startup: the server is still starting"]
    else:
        checks, names = await run_in_threadpool(readiness, get_state(request))
        failed = [f"{name}: {checks[name]}" for name in names]
    if not failed:
        return Response(status_code=200)
    why = f" ({'; '.join(failed)})" if sees_checks(request) else ""
    return AsciiJSONResponse(
        {"error": f"unhealthy{why}; retry after the Retry-After seconds",
         "error_type": "Unhealthy"},
        status_code=503, headers={"Retry-After": str(READY_RETRY_AFTER_S)},
    )
