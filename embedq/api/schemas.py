"""Wire shapes of the OpenAI-compatible routes, and the parsing of an embeddings request.

The request body is parsed by hand (`parse_embedding_request`), not by a pydantic body
parameter, so that every mistake gets its own status and a message that says what to
change; `request_schema(settings)` documents the same rules, limits included, in OpenAPI.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from embedq.api import token_ids
from embedq.config import Settings
from embedq.errors import InvalidInput, MalformedRequest, UnsupportedMediaType
from embedq.limits import MAX_DIMENSIONS, check_dimensions, check_texts

ENCODING_FORMATS = ("float", "base64")


class EmbeddingData(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str = Field(
        description="floats, or base64 of little-endian float32 bytes (encoding_format=base64)"
    )


class Usage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class EmbeddingResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[EmbeddingData]
    model: str
    usage: Usage


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = Field(description="unix seconds: when the model's files were written "
                         "(or, without local files, when this API process started)")
    owned_by: str = "embedq"
    revision: str
    dimension: int | None = Field(description="width of the vectors returned by default")
    max_seq_length: int | None = Field(description="tokens per input the model reads")
    truncate: bool = Field(description="longer inputs are truncated (true) or refused")
    aliases: list[str] = Field(default_factory=list, description="other names sent as "
                               "`model` for this model (EMBEDQ_MODEL_ALIASES, `embedq "
                               "models switch`), on its default tier's card")


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None
    code: str


class ErrorBody(BaseModel):
    error: ErrorDetail


@dataclass(frozen=True)
class EmbeddingCall:
    """A parsed, checked request: texts in input order and how to answer them."""

    texts: list[str]
    model: str | None
    encoding_format: str
    dimensions: int | None


def request_schema(settings: Settings, dimension: int | None) -> dict[str, Any]:
    """The JSON schema of POST /v1/embeddings, with this deployment's limits."""
    text = {"type": "string", "minLength": 1, "maxLength": settings.api.max_input_chars}
    ids = {"type": "array", "minItems": 1, "items": {
        "type": "integer", "minimum": 0, "maximum": token_ids.VOCABULARY - 1}}
    dimensions: dict[str, Any] = {
        "type": ["integer", "null"], "minimum": 1, "maximum": MAX_DIMENSIONS,
        "description": "truncate vectors to this width (renormalized)",
    }
    if dimension is not None:
        dimensions["maximum"] = dimension
    return {
        "title": "EmbeddingRequest",
        "type": "object",
        "required": ["input"],
        "properties": {
            "input": {
                "description": "a string, or a list of strings, each non-empty; or token "
                               "ids of OpenAI's cl100k_base (one list of ids, or a list of "
                               "them), which are decoded to the text they encode",
                "anyOf": [
                    text,
                    {"type": "array", "items": text, "minItems": 1,
                     "maxItems": settings.api.max_inputs},
                    ids,
                    {"type": "array", "items": ids, "minItems": 1,
                     "maxItems": settings.api.max_inputs},
                ],
            },
            "model": {"type": ["string", "null"],
                      "description": "the served model (GET /v1/models); null: that one"},
            "encoding_format": {"enum": [*ENCODING_FORMATS, None], "default": "float"},
            "dimensions": dimensions,
            "user": {"type": ["string", "null"], "description": "accepted and ignored"},
        },
    }


def read_json_body(content_type: str | None, body: bytes) -> Any:
    """The JSON value of a request body; MalformedRequest (400/415) says what is wrong."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise UnsupportedMediaType(
            f"the body is sent as {media or 'no content type'!r}: send JSON with the "
            "header `Content-Type: application/json`"
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedRequest(
            f"the body is not valid UTF-8 (byte {exc.start}): encode the JSON as UTF-8"
        ) from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise MalformedRequest(f"the body is not valid JSON ({exc}): fix the JSON") from None
    except RecursionError:
        raise MalformedRequest(
            "the body is nested too deeply to parse: send a JSON object as documented, "
            'e.g. {"input": ["some text"]}'
        ) from None


def parse_embedding_request(payload: Any, settings: Settings) -> EmbeddingCall:
    """Check an embeddings request against the wire rules and this deployment's limits."""
    if not isinstance(payload, dict):
        raise MalformedRequest(
            'the body must be a JSON object such as {"input": ["some text"], "model": "..."}'
        )
    raw = payload.get("input")
    if token_ids.is_token_ids(raw):
        if len(raw) > settings.api.max_inputs:
            parse_texts(raw, settings)  # the error for too many inputs, before decoding
        raw = token_ids.decode(raw)
    texts = parse_texts(raw, settings)
    model = payload.get("model")
    if model is not None and not isinstance(model, str):
        raise InvalidInput("model must be a string naming a served model (GET /v1/models)",
                           "model")
    fmt = payload.get("encoding_format")
    if fmt is None:
        fmt = "float"
    if fmt not in ENCODING_FORMATS:
        raise InvalidInput(
            f"encoding_format={fmt!r} is not supported: use 'float' or 'base64'",
            "encoding_format",
        )
    dims = check_dimensions(payload.get("dimensions"))
    user = payload.get("user")
    if user is not None and not isinstance(user, str):
        raise InvalidInput("user must be a string (it is accepted and ignored)", "user")
    return EmbeddingCall(texts, model, fmt, dims)


def parse_texts(raw: Any, settings: Settings, param: str = "input") -> list[str]:
    """A string or a list of strings, each checked against this deployment's limits
    (embedq.limits, the table every way in shares); `param` names the field in messages
    (TEI's routes call it "inputs")."""
    return check_texts(raw, settings, param)
