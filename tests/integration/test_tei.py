"""The text-embeddings-inference (TEI) routes as TEI clients use them: a real `embedq
serve`, a real worker, Redis and Postgres. Clients: huggingface_hub's InferenceClient, and
requests shaped exactly as Dify's "Text Embedding Inference" provider sends them."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
import pytest
from huggingface_hub import InferenceClient, constants
from huggingface_hub.errors import HfHubHTTPError

from embedq.encoders.hashing import HashingEncoder
from tests.conftest import Cluster
from tests.integration.test_api_support import ApiServer

pytestmark = pytest.mark.integration

KEY = "tei-test-key"
WINDOW = 256  # the hashing encoder's window: 2 + words tokens


def raw(text: str) -> npt.NDArray[np.float32]:
    row: npt.NDArray[np.float32] = HashingEncoder().encode([text])[0]
    return row


def expected(text: str, dims: int | None = None) -> npt.NDArray[np.float32]:
    row = raw(text)[:dims]
    unit: npt.NDArray[np.float32] = row / np.linalg.norm(row)
    return unit


def counters(url: str) -> dict[str, float]:
    out = {}
    for line in httpx.get(url + "/metrics", timeout=30).text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def assert_tei_error(response: httpx.Response, status: int, error_type: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "error_type"}
    assert body["error_type"] == error_type
    assert body["error"]
    message: str = body["error"]
    return message


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Iterator[ApiServer]:
    with ApiServer(cluster.env, cluster.tmp / "api-tei.log") as server:
        yield server


@pytest.fixture(scope="module")
def keyed_api(cluster: Cluster) -> Iterator[ApiServer]:
    env = {**cluster.env, "EMBEDQ_API_KEYS": KEY}
    with ApiServer(env, cluster.tmp / "api-tei-keyed.log") as server:
        yield server


@pytest.fixture
def hub_reaches_localhost(monkeypatch: pytest.MonkeyPatch) -> None:
    """HF_HUB_OFFLINE (set for the tests, so nothing downloads) makes huggingface_hub
    refuse every URL, a local server's too; these clients only reach 127.0.0.1."""
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


def embed(url: str, body: Any, **kwargs: Any) -> httpx.Response:
    return httpx.post(url + "/embed", json=body, timeout=60, **kwargs)


# --- /info, /health
def test_info_reports_the_model_and_limits_in_tei_shape(api: ApiServer) -> None:
    info = httpx.get(api.url + "/info", timeout=30).json()
    models = httpx.get(api.url + "/v1/models", timeout=30).json()["data"][0]
    assert info["model_id"] == models["id"]
    assert info["model_sha"] == models["revision"]
    assert info["model_dtype"] == "float32"
    assert list(info["model_type"]) == ["embedding"]  # what Dify's provider checks
    assert info["max_input_length"] == WINDOW == models["max_seq_length"]
    assert info["max_client_batch_size"] == 2048  # EMBEDQ_MAX_INPUTS
    assert info["auto_truncate"] is False
    for key in ("max_concurrent_requests", "max_batch_tokens", "tokenization_workers"):
        assert isinstance(info[key], int) and info[key] > 0, key
    assert isinstance(info["version"], str)


def test_health_is_200_with_an_empty_body_and_needs_no_key(keyed_api: ApiServer) -> None:
    response = httpx.get(keyed_api.url + "/health", timeout=30)
    assert response.status_code == 200, response.text
    assert response.content == b""


# --- huggingface_hub
@pytest.mark.usefixtures("hub_reaches_localhost")
def test_huggingface_inference_client_feature_extraction(api: ApiServer, salt: str) -> None:
    client = InferenceClient(model=api.url, token="unused")  # an open server ignores it
    one = client.feature_extraction(f"{salt} hub one")
    assert one.shape == (1, 384) and one.dtype == np.float32
    np.testing.assert_allclose(one[0], expected(f"{salt} hub one"), atol=1e-6)
    texts = [f"{salt} hub {i}" for i in range(5)]
    many = client.feature_extraction(texts)
    assert many.shape == (5, 384)
    for row, text in zip(many, texts, strict=True):
        np.testing.assert_allclose(row, expected(text), atol=1e-6)
    unnormalized = client.feature_extraction(texts[0], normalize=False)
    np.testing.assert_allclose(unnormalized[0], raw(texts[0]), rtol=1e-5)
    narrow = client.feature_extraction(texts[1], dimensions=64)
    np.testing.assert_allclose(narrow[0], expected(texts[1], 64), atol=1e-6)


@pytest.mark.usefixtures("hub_reaches_localhost")
def test_huggingface_client_sends_the_key_and_sees_tei_errors(
    keyed_api: ApiServer, salt: str
) -> None:
    client = InferenceClient(model=keyed_api.url, token=KEY)
    vectors = client.feature_extraction([f"{salt} keyed"])
    np.testing.assert_allclose(vectors[0], expected(f"{salt} keyed"), atol=1e-6)
    long_text = " ".join(["word"] * (WINDOW + 10)) + f" {salt}"
    with pytest.raises(HfHubHTTPError) as raised:
        client.feature_extraction(long_text)
    assert raised.value.response is not None
    assert raised.value.response.status_code == 413
    assert "truncate" in raised.value.response.json()["error"]
    truncated = client.feature_extraction(long_text, truncate=True)
    assert truncated.shape == (1, 384)


def test_every_tei_route_needs_the_key(keyed_api: ApiServer) -> None:
    for method, path, body in [("GET", "/info", None), ("POST", "/embed", {"inputs": "x"}),
                               ("POST", "/", {"inputs": "x"}),
                               ("POST", "/tokenize", {"inputs": "x"})]:
        response = httpx.request(method, keyed_api.url + path, json=body, timeout=30)
        message = assert_tei_error(response, 401, "Unauthorized")
        assert "EMBEDQ_API_KEYS" in message
        assert response.headers["www-authenticate"] == "Bearer"
        wrong = httpx.request(method, keyed_api.url + path, json=body, timeout=30,
                              headers={"Authorization": "Bearer nope"})
        assert_tei_error(wrong, 401, "Unauthorized")


# --- Dify's "Text Embedding Inference" provider
def dify_truncate(texts: list[str], tokens: list[list[dict[str, Any]]], context_size: int
                  ) -> list[str]:
    """Dify's own cut, as its provider does it with /tokenize's answer."""
    inputs = []
    for text, result in zip(texts, tokens, strict=True):
        if len(result) >= context_size:
            pre = 0
            for token in result:
                if not token["special"]:
                    break
                pre += 1
            rest = len([t for t in result if t["special"]]) - pre
            cutoff = result[context_size - rest - 20]["start"]
            inputs.append(text[0:cutoff])
        else:
            inputs.append(text)
    return inputs


def test_dify_tei_provider_indexes_through_info_tokenize_and_embed(
    keyed_api: ApiServer, salt: str
) -> None:
    url = keyed_api.url
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"}
    info = httpx.get(url + "/info", headers=headers, timeout=10).json()
    assert list(info["model_type"]) == ["embedding"]
    context_size = info["max_input_length"]
    max_chunks = info["max_client_batch_size"]
    long_text = " ".join(f"w{i}" for i in range(400)) + f" {salt}"
    texts = [f"{salt} dify doc {i}" for i in range(30)] + [long_text]
    tokens = httpx.post(url + "/tokenize", json={"inputs": texts}, headers=headers,
                        timeout=30).json()
    assert [len(t) for t in tokens[:2]] == [2 + 4, 2 + 4]
    inputs = dify_truncate(texts, tokens, context_size)
    assert len(inputs[-1].split()) == context_size - 2 - 20
    # Dify batches by max_client_batch_size: here a small batch forces several requests,
    # as a corpus longer than max_client_batch_size would.
    for batch_size in (max_chunks, 7):
        vectors: list[list[float]] = []
        for i in range(0, len(inputs), batch_size):
            response = httpx.post(url + "/embed", json={"inputs": inputs[i : i + batch_size]},
                                  headers=headers, timeout=60)
            assert response.status_code == 200, response.text
            vectors.extend(response.json())
        assert len(vectors) == len(texts)
        for text, vector in zip(inputs, vectors, strict=True):
            np.testing.assert_allclose(vector, expected(text), atol=1e-6)
    # Newer Dify versions embed through /v1/embeddings after the same /info and /tokenize.
    openai = httpx.post(url + "/v1/embeddings", json={"input": inputs}, headers=headers,
                        timeout=60).json()
    for text, item in zip(inputs, openai["data"], strict=True):
        np.testing.assert_allclose(item["embedding"], expected(text), atol=1e-6)


# --- /tokenize
def test_tokenize_lists_tokens_with_offsets_into_the_input(api: ApiServer) -> None:
    text = "open  an account"
    with_special = httpx.post(api.url + "/tokenize", json={"inputs": text}, timeout=30).json()
    assert len(with_special) == 1
    row = with_special[0]
    assert [t["special"] for t in row] == [True, False, False, False, True]
    for token in row[1:-1]:
        assert set(token) == {"id", "text", "special", "start", "stop"}
        assert text[token["start"] : token["stop"]] == token["text"]
    assert row[0]["start"] is None and row[0]["stop"] is None
    bare = httpx.post(api.url + "/tokenize",
                      json={"inputs": [text, "x"], "add_special_tokens": False},
                      timeout=30).json()
    assert [[t["text"] for t in r] for r in bare] == [["open", "an", "account"], ["x"]]


# --- one cache for both APIs
def test_tei_embed_and_openai_embeddings_share_the_cache(
    cluster: Cluster, api: ApiServer, salt: str
) -> None:
    text = f"{salt} shared between the two APIs"
    first = embed(api.url, {"inputs": [text]})
    assert first.status_code == 200, first.text
    hits_before = counters(api.url)['embedq_cache_hits_all_total']
    second = httpx.post(api.url + "/v1/embeddings", json={"input": [text]}, timeout=60)
    assert second.status_code == 200, second.text
    hits_after = counters(api.url)['embedq_cache_hits_all_total']
    assert second.json()["data"][0]["embedding"] == first.json()[0]
    assert hits_after - hits_before == 1
    assert cluster.passes()[hashlib.sha256(text.encode()).hexdigest()] == 1


# --- errors in TEI's shape
def test_over_long_inputs_are_413_unless_truncate(api: ApiServer, salt: str) -> None:
    long_text = " ".join(["word"] * WINDOW) + f" {salt}"
    message = assert_tei_error(embed(api.url, {"inputs": ["short", long_text]}), 413,
                               "Validation")
    assert "inputs[1]" in message and '"truncate": true' in message
    ok = embed(api.url, {"inputs": ["short", long_text], "truncate": True})
    assert ok.status_code == 200, ok.text
    assert ok.headers["X-Embedq-Truncated"] == "1"
    left = embed(api.url, {"inputs": long_text, "truncate": True,
                           "truncation_direction": "left"})
    assert "right" in assert_tei_error(left, 422, "Validation")
    right = embed(api.url, {"inputs": "short", "truncation_direction": "Right"})
    assert right.status_code == 200, right.text


@pytest.mark.parametrize(("body", "status", "needle"), [
    ({"inputs": []}, 422, "empty list"),
    ({"inputs": ""}, 422, "empty string"),
    ({}, 422, "inputs is missing"),
    ({"inputs": [1, 2]}, 422, "not a string"),
    ({"inputs": ["x"] * 2049}, 413, "2049 items"),
    ({"inputs": "x", "prompt_name": "query"}, 422, "prompt_name"),
    ({"inputs": "x", "normalize": "yes"}, 422, "normalize"),
    ({"inputs": "x", "truncate": 1}, 422, "truncate"),
    ({"inputs": "x", "truncation_direction": "middle"}, 422, "truncation_direction"),
    ({"inputs": "x", "dimensions": 0}, 422, "dimensions"),
    ({"inputs": "x", "dimensions": 385}, 422, "wider"),
    (["x"], 400, "JSON object"),
])
def test_bad_embed_requests_get_tei_errors(
    api: ApiServer, body: Any, status: int, needle: str
) -> None:
    message = assert_tei_error(embed(api.url, body), status, "Validation")
    assert needle in message


def test_bad_bodies_and_tokenize_errors_get_tei_errors(api: ApiServer) -> None:
    not_json = httpx.post(api.url + "/embed", content=b'{"inputs": ',
                          headers={"Content-Type": "application/json"}, timeout=30)
    assert_tei_error(not_json, 400, "Validation")
    as_text = httpx.post(api.url + "/embed", content=b'{"inputs": "x"}',
                         headers={"Content-Type": "text/plain"}, timeout=30)
    assert_tei_error(as_text, 415, "Validation")
    prompt = httpx.post(api.url + "/tokenize", json={"inputs": "x", "prompt_name": "q"},
                        timeout=30)
    assert_tei_error(prompt, 422, "Validation")
    flag = httpx.post(api.url + "/tokenize", json={"inputs": "x", "add_special_tokens": 0},
                      timeout=30)
    assert_tei_error(flag, 422, "Validation")


def test_openai_routes_keep_the_openai_error_shape(api: ApiServer) -> None:
    response = httpx.post(api.url + "/v1/embeddings", json={"input": []}, timeout=30)
    assert response.status_code == 422
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}
