"""The API's edge, without a server: request parsing, the error table, API keys, token
counting, and the body limit driven through the ASGI protocol."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

from embedq.api.auth import key_matches
from embedq.api.errors import ERROR_TABLE, kind_of, validation_message
from embedq.api.limits import BodyLimitMiddleware
from embedq.api.schemas import parse_embedding_request, read_json_body, request_schema
from embedq.config import Settings
from embedq.encoders import model_path
from embedq.encoders.hashing import HashingEncoder
from embedq.encoders.tokens import load_token_counter
from embedq.errors import (
    BrokerUnavailable,
    ConfigError,
    DatabaseUnavailable,
    EmbeddingFailed,
    EmbeddingTimeout,
    EmbedqError,
    InputTooLarge,
    InvalidInput,
    MalformedRequest,
    NotFound,
    Overloaded,
    PoisonText,
    Unauthorized,
    UnknownModel,
    UnsupportedMediaType,
    UpstreamError,
)

SETTINGS = Settings().with_overrides(max_inputs=3, max_input_chars=10)


# --- parsing
def test_a_string_input_is_one_text_and_defaults_apply() -> None:
    call = parse_embedding_request({"input": "ping", "model": "m"}, SETTINGS)
    assert (call.texts, call.model, call.encoding_format, call.dimensions) == (
        ["ping"], "m", "float", None)


def test_nulls_mean_defaults_and_integral_floats_are_integers() -> None:
    call = parse_embedding_request(
        {"input": ["a"], "model": None, "encoding_format": None, "dimensions": 64.0,
         "user": None, "extra": True}, SETTINGS)
    assert (call.model, call.encoding_format, call.dimensions) == (None, "float", 64)


@pytest.mark.parametrize(
    ("payload", "error", "param"),
    [
        ([], MalformedRequest, None),
        ({}, InvalidInput, "input"),
        ({"input": []}, InvalidInput, "input"),
        ({"input": ["a", 1]}, InvalidInput, "input"),
        ({"input": [[1, 100300]]}, InvalidInput, "input"),  # not a cl100k_base id
        ({"input": ["a", ""]}, InvalidInput, "input"),
        ({"input": ["a"] * 4}, InputTooLarge, "input"),
        ({"input": "x" * 11}, InputTooLarge, "input"),
        ({"input": "a\ud800"}, InvalidInput, "input"),
        ({"input": "a", "model": 1}, InvalidInput, "model"),
        ({"input": "a", "encoding_format": "hex"}, InvalidInput, "encoding_format"),
        ({"input": "a", "dimensions": 0}, InvalidInput, "dimensions"),
        ({"input": "a", "dimensions": True}, InvalidInput, "dimensions"),
        ({"input": "a", "dimensions": 2.5}, InvalidInput, "dimensions"),
        ({"input": "a", "user": 1}, InvalidInput, "user"),
    ],
)
def test_each_mistake_has_its_error_and_param(
    payload: Any, error: type[EmbedqError], param: str | None
) -> None:
    with pytest.raises(error) as caught:
        parse_embedding_request(payload, SETTINGS)
    assert type(caught.value) is error
    assert getattr(caught.value, "param", None) == param
    assert str(caught.value)


@pytest.mark.parametrize(
    ("content_type", "body", "error"),
    [
        ("text/plain", b"{}", UnsupportedMediaType),
        (None, b"{}", UnsupportedMediaType),
        ("application/json", b"\xff", MalformedRequest),
        ("application/json", b"{", MalformedRequest),
        ("application/json", b"", MalformedRequest),
    ],
)
def test_bodies_that_are_not_utf8_json_are_refused(
    content_type: str | None, body: bytes, error: type[EmbedqError]
) -> None:
    with pytest.raises(error):
        read_json_body(content_type, body)


def test_json_content_types_with_parameters_are_read() -> None:
    assert read_json_body("application/json; charset=utf-8", b'{"a": 1}') == {"a": 1}
    assert read_json_body("application/vnd.api+json", b"[1]") == [1]


def test_the_request_schema_states_the_limits() -> None:
    schema = request_schema(SETTINGS, 384)
    text, array, ids, id_lists = schema["properties"]["input"]["anyOf"]
    assert text["maxLength"] == 10 and array["maxItems"] == 3
    assert ids["items"]["maximum"] == id_lists["items"]["items"]["maximum"] == 100255
    assert id_lists["maxItems"] == 3
    assert schema["properties"]["dimensions"]["maximum"] == 384


# --- the error table
@pytest.mark.parametrize(
    ("error", "status"),
    [
        (Unauthorized("k"), 401),
        (UnknownModel("m"), 404),
        (InputTooLarge("big"), 413),
        (UnsupportedMediaType("t"), 415),
        (MalformedRequest("j"), 400),
        (InvalidInput("i"), 422),
        (NotFound("n"), 404),
        (Overloaded("o"), 429),
        (DatabaseUnavailable("d"), 503),
        (BrokerUnavailable("b"), 503),
        (EmbeddingTimeout("t"), 503),
        (PoisonText("p"), 422),
        (EmbeddingFailed("f"), 422),
        (UpstreamError("u"), 502),
        (ConfigError("c"), 500),
        (EmbedqError("e"), 500),
    ],
)
def test_the_error_table_maps_each_kind(error: EmbedqError, status: int) -> None:
    assert kind_of(error).status == status


def test_retryable_kinds_carry_retry_after() -> None:
    for error in (Overloaded("o"), DatabaseUnavailable("d"), EmbeddingTimeout("t"),
                  UpstreamError("u")):
        assert kind_of(error).retry_after_s is not None


def test_no_row_of_the_table_is_shadowed_by_an_earlier_one() -> None:
    classes = [cls for cls, _ in ERROR_TABLE]
    for i, cls in enumerate(classes):
        assert not any(issubclass(cls, earlier) for earlier in classes[:i]), cls


def test_validation_errors_name_the_parameter() -> None:
    message, param = validation_message(
        [{"loc": ("body", "items", 2), "msg": "Input should be a valid string"},
         {"loc": ("query", "x"), "msg": "missing"}])
    assert param == "items[2]"
    assert message == "items[2]: Input should be a valid string (and 1 more problems)"


# --- API keys
def test_keys_match_exactly() -> None:
    keys = ("alpha", "beta")
    assert key_matches("beta", keys)
    assert not key_matches("bet", keys)
    assert not key_matches("betaa", keys)
    assert not key_matches("", keys)
    assert not key_matches("\udcff", keys)


# --- token counting
def test_the_hashing_rule_counts_for_the_test_encoders() -> None:
    counter = load_token_counter(Settings().with_overrides(encoder="faulty"))
    assert counter.window == 256 and counter.dimension == 384
    text = "one two three"
    assert counter.raw_tokens([text]) == HashingEncoder().raw_tokens([text])


def test_the_model_tokenizer_counts_like_the_model_without_loading_it() -> None:
    folder = model_path(Settings().model.model)  # the default model's package is a dependency
    counter = load_token_counter(Settings())
    assert (counter.window, counter.dimension) == (256, 384)
    from transformers import AutoTokenizer

    reference = AutoTokenizer.from_pretrained(folder)
    texts = ["hello world", "héllo wörld " * 200, "日本語のテキスト"]
    expected = [len(ids) for ids in reference(texts, truncation=False, verbose=False)["input_ids"]]
    assert counter.raw_tokens(texts) == expected
    assert counter.raw_tokens(texts)[1] > 256


# --- the body limit, through the ASGI protocol
async def _echo_length(scope: Scope, receive: Receive, send: Send) -> None:
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(size).encode()})


def _run(chunks: list[bytes], headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes]:
    app = BodyLimitMiddleware(_echo_length, max_body_bytes=10)
    scope: Scope = {"type": "http", "method": "POST", "path": "/", "headers": headers}
    queue = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
             for i, c in enumerate(chunks)]
    sent: list[Message] = []

    async def receive() -> Message:
        return queue.pop(0) if queue else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    starts = [m for m in sent if m["type"] == "http.response.start"]
    assert len(starts) == 1
    return int(starts[0]["status"]), b"".join(m.get("body", b"") for m in sent)


def test_a_body_under_the_limit_passes_whole() -> None:
    assert _run([b"12345", b"67890"], []) == (200, b"10")


def test_a_declared_length_over_the_limit_is_refused_unread() -> None:
    status, body = _run([b"x" * 11], [(b"content-length", b"11")])
    assert status == 413
    assert json.loads(body)["error"]["param"] == "body"


def test_a_chunked_body_is_cut_at_the_first_chunk_past_the_limit() -> None:
    status, body = _run([b"123456", b"789012", b"345"], [])
    assert status == 413
    assert json.loads(body)["error"]["code"] == "input_too_large"


def test_a_malformed_content_length_is_400() -> None:
    assert _run([b"x"], [(b"content-length", b"1x")])[0] == 400


def test_vector_bodies_carry_each_float32_as_its_shortest_decimal() -> None:
    """The vector routes write each float as the shortest decimal that reads back as the
    same float32 (numpy's own repr of it, as TEI writes them), extremes, tiny values and
    signed zeros included, in both the OpenAI and the TEI body; a vector orjson does not
    write itself (not contiguous) reads the same."""
    from embedq.api.routes.embeddings import _json_body
    from embedq.api.routes.tei import _vectors_json
    from embedq.service import Outcome
    from tests.unit.test_wire import assert_float32_text, sample_vectors

    vectors = sample_vectors()
    outcomes = [Outcome(v, None, "computed") for v in vectors]
    openai_text = _json_body(outcomes, "float", "m", 7)
    tei_text = _vectors_json(outcomes)
    openai, tei = json.loads(openai_text), json.loads(tei_text)
    for i, v in enumerate(vectors):
        assert_float32_text(openai["data"][i]["embedding"], v)
        assert_float32_text(tei[i], v)
    assert b"0.1," in openai_text and b"0.10000000149" not in openai_text
    assert openai["usage"] == {"prompt_tokens": 7, "total_tokens": 7}
