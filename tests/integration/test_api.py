"""The HTTP API as clients use it: a real `embedq serve` on 127.0.0.1, a real worker,
Redis and Postgres. Request shapes are the ones Dify's "OpenAI-API-compatible" provider
and the `openai` package send."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np
import openai
import pytest

from embedq.encoders.hashing import HashingEncoder
from tests.conftest import Cluster
from tests.integration.test_api_support import ApiServer

pytestmark = pytest.mark.integration

MODEL = "all-MiniLM-L6-v2"


def expected(text: str, dims: int | None = None) -> np.ndarray:
    raw = HashingEncoder().encode([text])[0][:dims]
    return raw / np.linalg.norm(raw)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def assert_error_shape(response: httpx.Response, status: int, param: str | None = None) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"] and error["type"] and error["code"]
    if param is not None:
        assert error["param"] == param


def counters(api: ApiServer) -> dict[str, float]:
    """Cluster-wide counters as /metrics exports them (name{labels} -> value)."""
    text = httpx.get(api.url + "/metrics", timeout=30).text
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Iterator[ApiServer]:
    with ApiServer(cluster.env, cluster.tmp / "api.log") as server:
        yield server


def post(api: ApiServer, body: Any, **kwargs: Any) -> httpx.Response:
    return httpx.post(api.url + "/v1/embeddings", json=body, timeout=60, **kwargs)


# --- what Dify sends
def test_dify_credential_check_with_a_string_input_gets_model_and_vector(
    api: ApiServer, salt: str
) -> None:
    response = httpx.post(
        api.url + "/v1/embeddings",
        content=json.dumps({"input": "ping", "model": MODEL}),
        headers={"Content-Type": "application/json"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "list"
    assert body["model"] == MODEL
    assert [d["index"] for d in body["data"]] == [0]
    assert body["data"][0]["object"] == "embedding"
    np.testing.assert_allclose(body["data"][0]["embedding"], expected("ping"), atol=1e-6)
    assert body["usage"] == {"prompt_tokens": 3, "total_tokens": 3}


def test_dify_indexing_lists_come_back_in_input_order(api: ApiServer, salt: str) -> None:
    chunks = [[f"{salt} doc {i} part {j}" for j in range(1 + i % 3)] for i in range(24)]

    def one(texts: list[str]) -> tuple[list[str], dict[str, Any]]:
        return texts, post(api, {"input": texts, "model": MODEL}).json()

    with ThreadPoolExecutor(12) as pool:
        results = list(pool.map(one, chunks))
    for texts, body in results:
        assert body["model"] == MODEL
        assert [d["index"] for d in body["data"]] == list(range(len(texts)))
        for text, item in zip(texts, body["data"], strict=True):
            np.testing.assert_allclose(item["embedding"], expected(text), atol=1e-6)


def test_openai_client_embeds_and_base64_equals_float(api: ApiServer, salt: str) -> None:
    texts = [f"{salt} openai one", f"{salt} openai two"]
    client = openai.OpenAI(base_url=api.url + "/v1", api_key="unused", max_retries=0)
    created = client.embeddings.create(model=MODEL, input=texts)
    assert created.model == MODEL
    assert [d.index for d in created.data] == [0, 1]
    as_floats = post(api, {"input": texts, "model": MODEL, "encoding_format": "float"}).json()
    as_b64 = post(api, {"input": texts, "model": MODEL, "encoding_format": "base64"}).json()
    for i, text in enumerate(texts):
        floats = np.asarray(as_floats["data"][i]["embedding"], dtype=np.float32)
        decoded = np.frombuffer(base64.b64decode(as_b64["data"][i]["embedding"]), dtype="<f4")
        np.testing.assert_array_equal(decoded, floats)
        np.testing.assert_allclose(created.data[i].embedding, floats, atol=1e-7)
        np.testing.assert_allclose(floats, expected(text), atol=1e-6)


def test_concurrent_one_text_requests_are_batched_and_encode_each_text_once(
    cluster: Cluster, api: ApiServer, salt: str
) -> None:
    # Each model batch sleeps 0.2 s, so requests that reach the server while a call is in
    # flight are there to be grouped however the 100 client threads happen to be scheduled
    # (with an instant encoder a slow start of the threads spread them over many calls).
    texts = [f"{salt} concurrent {i} [[sleep:0.2]]" for i in range(20)]
    before = counters(api)
    start = threading.Barrier(100)
    with httpx.Client(timeout=60, limits=httpx.Limits(max_connections=100)) as http:

        def one(i: int) -> tuple[str, list[float]]:
            text = texts[i % 20]
            start.wait()  # all 100 in flight together, as an indexer's burst is
            body = http.post(api.url + "/v1/embeddings", json={"input": [text], "model": MODEL})
            assert body.status_code == 200, body.text
            return text, body.json()["data"][0]["embedding"]

        with ThreadPoolExecutor(100) as pool:
            results = list(pool.map(one, range(100)))
    after = counters(api)
    for text, vector in results:
        np.testing.assert_allclose(vector, expected(text), atol=1e-6)
    passes = cluster.passes()
    assert [passes.get(digest(t), 0) for t in texts] == [1] * 20
    assert after["embedq_encoded_texts_total"] - before["embedq_encoded_texts_total"] == 20
    # Server-side coalescing: far fewer service calls and model batches than requests.
    lookups = after["embedq_lookups_total"] - before["embedq_lookups_total"]
    batches = after["embedq_batches_total"] - before["embedq_batches_total"]
    assert lookups < 50, lookups
    requests = (after["embedq_embedding_requests_total"]
                - before["embedq_embedding_requests_total"])
    assert requests == 100
    assert batches < 20, batches


def test_dimensions_truncate_and_renormalize(api: ApiServer, salt: str) -> None:
    text = f"{salt} narrow"
    body = post(api, {"input": text, "model": MODEL, "dimensions": 64}).json()
    vector = np.asarray(body["data"][0]["embedding"])
    assert vector.shape == (64,)
    np.testing.assert_allclose(vector, expected(text, 64), atol=1e-6)
    full = post(api, {"input": text, "dimensions": 384}).json()["data"][0]["embedding"]
    np.testing.assert_allclose(full, expected(text), atol=1e-6)
    assert_error_shape(post(api, {"input": text, "dimensions": 385}), 422, "dimensions")


def test_long_inputs_are_truncated_and_counted_in_a_header(api: ApiServer, salt: str) -> None:
    long_text = f"{salt} " + "word " * 400
    response = post(api, {"input": [long_text, f"{salt} short"], "model": MODEL})
    assert response.status_code == 200, response.text
    assert response.headers["X-Embedq-Truncated"] == "1"
    assert response.json()["usage"]["prompt_tokens"] == 256 + 4
    assert "embedq_truncated_inputs_total 1.0" in httpx.get(api.url + "/metrics").text


def test_models_lists_dimension_and_window(api: ApiServer) -> None:
    body = httpx.get(api.url + "/v1/models").json()
    assert body["object"] == "list"
    (card,) = body["data"]
    assert (card["id"], card["dimension"], card["max_seq_length"]) == (MODEL, 384, 256)
    assert httpx.get(api.url + f"/v1/models/{MODEL}").json()["id"] == MODEL
    assert_error_shape(httpx.get(api.url + "/v1/models/other-model"), 404)


def test_an_open_server_says_so_at_start(api: ApiServer) -> None:
    assert "EMBEDQ_API_KEYS is unset: the API is open" in api.log()


def test_two_api_processes_share_their_metrics(cluster: Cluster, salt: str) -> None:
    with ApiServer(cluster.env, cluster.tmp / "api-two.log", "--workers", "2") as server:
        for i in range(12):
            response = post(server, {"input": f"{salt} two processes {i}"})
            assert response.status_code == 200, response.text
        values = counters(server)
    route = 'embedq_http_requests_total{method="POST",route="/v1/embeddings",status="200"}'
    assert values[route] == 12
    assert server.log().count("EMBEDQ_API_KEYS is unset") == 2  # one line per process


def test_health_and_readiness(api: ApiServer) -> None:
    assert httpx.get(api.url + "/healthz").json() == {"status": "ok"}
    ready = httpx.get(api.url + "/readyz")
    assert ready.status_code == 200
    checks = ready.json()["checks"]
    assert (checks["broker"], checks["database"], checks["hot_store"]) == ("ok", "ok", "ok")
    # Ready means at least one worker heartbeat; other tests' workers may also be live.
    live, word = checks["workers"].split()
    assert int(live) >= 1 and word == "live"


def test_metrics_cover_requests_cache_tiers_batches_queues_and_jobs(
    api: ApiServer, salt: str
) -> None:
    text = f"{salt} metric"
    post(api, {"input": text})
    post(api, {"input": text})
    metrics = httpx.get(api.url + "/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    values = counters(api)
    assert values['embedq_http_requests_total{method="POST",route="/v1/embeddings",status="200"}']
    # The repeat is answered by this API process's memory tier, in front of Redis.
    assert values['embedq_cache_hits_total{tier="local"}'] >= 1
    assert 'embedq_cache_hits_total{tier="hot"}' in values
    assert 'embedq_cache_hits_total{tier="durable"}' in values
    for name in ("embedq_coalesced_total", "embedq_encoded_texts_total",
                 "embedq_batch_texts_count", "embedq_batch_tokens_count",
                 "embedq_encode_seconds_count", 'embedq_queue_depth{queue="online"}',
                 'embedq_queue_depth{queue="bulk"}',
                 'embedq_http_request_seconds_count{route="/v1/embeddings"}'):
        assert name in values, name
    assert values["embedq_batch_texts_count"] >= 1
    assert "# TYPE embedq_jobs gauge" in metrics.text


def test_openapi_document_and_docs_are_served(api: ApiServer) -> None:
    document = httpx.get(api.url + "/openapi.json").json()
    assert {"/v1/embeddings", "/v1/models", "/healthz", "/readyz", "/metrics"} <= set(
        document["paths"]
    )
    docs = httpx.get(api.url + "/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


# --- bad input: always 4xx in the OpenAI error shape
JSON = {"Content-Type": "application/json"}
BAD_REQUESTS = [
    ("malformed JSON", b'{"input": "x"', JSON, 400, None),
    ("invalid UTF-8", b'{"input": "\xff\xfe"}', JSON, 400, None),
    ("wrong content type", b'{"input": "x"}', {"Content-Type": "text/plain"}, 415, None),
    ("form body", b"input=x", {"Content-Type": "application/x-www-form-urlencoded"}, 415, None),
    ("no body", b"", JSON, 400, None),
    ("array body", b'["x"]', JSON, 400, None),
    ("input missing", b'{"model": "all-MiniLM-L6-v2"}', JSON, 422, "input"),
    ("input a number", b'{"input": 5}', JSON, 422, "input"),
    ("non-string item", b'{"input": ["a", 7]}', JSON, 422, "input"),
    ("null item", b'{"input": ["a", null]}', JSON, 422, "input"),
    ("token id outside cl100k_base", b'{"input": [[1, 2, 100300]]}', JSON, 422, "input"),
    ("empty string", b'{"input": ""}', JSON, 422, "input"),
    ("empty item", b'{"input": ["a", ""]}', JSON, 422, "input"),
    ("empty list", b'{"input": []}', JSON, 422, "input"),
    ("lone surrogate", b'{"input": "a\\ud800b"}', JSON, 422, "input"),
    ("unknown model", b'{"input": "x", "model": "gpt-4"}', JSON, 404, "model"),
    ("model not a string", b'{"input": "x", "model": 3}', JSON, 422, "model"),
    ("dimensions zero", b'{"input": "x", "dimensions": 0}', JSON, 422, "dimensions"),
    ("dimensions text", b'{"input": "x", "dimensions": "64"}', JSON, 422, "dimensions"),
    ("dimensions bool", b'{"input": "x", "dimensions": true}', JSON, 422, "dimensions"),
    ("dimensions fraction", b'{"input": "x", "dimensions": 6.5}', JSON, 422, "dimensions"),
    ("encoding hex", b'{"input": "x", "encoding_format": "hex"}', JSON, 422,
     "encoding_format"),
    ("user a number", b'{"input": "x", "user": 5}', JSON, 422, "user"),
]


@pytest.mark.parametrize(
    ("body", "headers", "status", "param"),
    [pytest.param(*case[1:], id=case[0]) for case in BAD_REQUESTS],
)
def test_bad_requests_get_4xx_in_the_openai_error_shape(
    api: ApiServer, body: bytes, headers: dict[str, str], status: int, param: str | None
) -> None:
    response = httpx.post(api.url + "/v1/embeddings", content=body, headers=headers)
    assert_error_shape(response, status, param)


def test_unknown_routes_and_methods_answer_in_the_error_shape(api: ApiServer) -> None:
    assert_error_shape(httpx.get(api.url + "/v1/nothing"), 404)
    assert_error_shape(httpx.get(api.url + "/v1/embeddings"), 405)
