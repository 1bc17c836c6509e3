"""API keys, limits, load shedding and outages, each on a real `embedq serve` whose
settings make the rule easy to reach (small limits, a queue no worker reads, a database
that is not there)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kombu import Connection
from sqlalchemy.engine import make_url

from tests.conftest import Cluster
from tests.integration.test_api import MODEL, assert_error_shape
from tests.integration.test_api_support import ApiServer, TcpProxy

pytestmark = pytest.mark.integration

KEYS = ("first-key", "second-key")
MAX_INPUTS = 4
MAX_INPUT_CHARS = 100
MAX_BODY_BYTES = 2000


def _server(env: dict[str, str], log: Path, **overrides: object) -> ApiServer:
    env = {**env, **{f"EMBEDQ_{k.upper()}": str(v) for k, v in overrides.items()}}
    return ApiServer(env, log).start()


@pytest.fixture(scope="module")
def strict(cluster: Cluster) -> Iterator[ApiServer]:
    """Keys required, tiny limits, truncation off; ready (the cluster's worker seen)."""
    server = _server(
        cluster.env, cluster.tmp / "api-strict.log",
        api_keys=",".join(KEYS), max_inputs=MAX_INPUTS, max_input_chars=MAX_INPUT_CHARS,
        max_body_bytes=MAX_BODY_BYTES, truncate="false",
    )
    try:
        yield server.wait_ready()
    finally:
        server.stop()


def auth(key: str = KEYS[1]) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def post(api: ApiServer, body: object, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(api.url + "/v1/embeddings", json=body, timeout=60,
                      headers=auth() if headers is None else headers)


# --- API keys
def test_every_route_but_health_needs_a_key(strict: ApiServer, salt: str) -> None:
    body = {"input": f"{salt} keyed", "model": MODEL}
    missing = post(strict, body, headers={})
    assert_error_shape(missing, 401)
    assert missing.headers["WWW-Authenticate"] == "Bearer"
    assert_error_shape(post(strict, body, headers=auth("third-key")), 401)
    assert_error_shape(post(strict, body, headers={"Authorization": "Basic Zmlyc3Q="}), 401)
    for key in KEYS:
        keyed = post(strict, body, headers=auth(key))
        assert keyed.status_code == 200, keyed.text
    for path in ("/v1/models", "/metrics"):
        assert_error_shape(httpx.get(strict.url + path), 401)
        got = httpx.get(strict.url + path, headers=auth())
        assert got.status_code == 200, (path, got.text[:500])
    # The public reads (test_api_conventions.py): the docs describe nothing a key protects.
    for path in ("/healthz", "/readyz", "/openapi.json", "/docs", "/", "/ping"):
        got = httpx.get(strict.url + path)
        assert got.status_code == 200, (path, got.text)


def test_feature_routers_are_behind_the_key_too(strict: ApiServer) -> None:
    paths = httpx.get(strict.url + "/openapi.json", headers=auth()).json()["paths"]
    mine = {"/v1/embeddings", "/v1/models", "/v1/models/{model_id}", "/metrics",
            "/healthz", "/readyz", "/health", "/", "/ping"}
    tei = {"/info", "/embed", "/tokenize"}  # text-embeddings-inference's error shape
    for path, operations in paths.items():
        if path in mine or "{" in path:
            continue
        for method in operations:
            response = httpx.request(method.upper(), strict.url + path)
            if path in tei:
                assert response.status_code == 401, (path, response.text)
                assert response.json()["error_type"] == "Unauthorized"
            else:
                assert_error_shape(response, 401)


# --- limits
def test_too_many_inputs_is_413(strict: ApiServer) -> None:
    texts = [f"text {i}" for i in range(MAX_INPUTS + 1)]
    assert_error_shape(post(strict, {"input": texts}), 413, "input")
    assert post(strict, {"input": texts[:MAX_INPUTS]}).status_code == 200


def test_too_long_an_input_is_413(strict: ApiServer) -> None:
    assert_error_shape(post(strict, {"input": ["ok", "x" * (MAX_INPUT_CHARS + 1)]}), 413, "input")
    assert post(strict, {"input": "x" * MAX_INPUT_CHARS}).status_code == 200


def test_a_declared_body_over_the_limit_is_413(strict: ApiServer) -> None:
    body = b'{"input": "' + b"y" * MAX_BODY_BYTES + b'"}'
    response = httpx.post(strict.url + "/v1/embeddings", content=body,
                          headers={**auth(), "Content-Type": "application/json"})
    assert_error_shape(response, 413, "body")


def test_a_chunked_body_is_counted_as_it_streams(strict: ApiServer, salt: str) -> None:
    def chunks(text: str) -> Iterator[bytes]:
        payload = json.dumps({"input": text}).encode()
        for i in range(0, len(payload), 256):
            yield payload[i : i + 256]

    headers = {**auth(), "Content-Type": "application/json"}
    over = httpx.post(strict.url + "/v1/embeddings", content=chunks("z" * MAX_BODY_BYTES),
                      headers=headers)
    assert "content-length" not in over.request.headers
    assert_error_shape(over, 413, "body")
    under = httpx.post(strict.url + "/v1/embeddings", content=chunks(f"{salt} chunked"),
                       headers=headers)
    assert "content-length" not in under.request.headers
    assert under.status_code == 200, under.text


@pytest.fixture(scope="module")
def no_truncation(cluster: Cluster) -> Iterator[ApiServer]:
    server = _server(cluster.env, cluster.tmp / "api-no-truncation.log", truncate="false")
    try:
        yield server
    finally:
        server.stop()


def test_over_the_window_is_422_when_truncation_is_off(
    no_truncation: ApiServer, salt: str
) -> None:
    long_text = f"{salt} " + " ".join(["w"] * 260)
    response = httpx.post(no_truncation.url + "/v1/embeddings",
                          json={"input": ["fine", long_text]}, timeout=60)
    assert_error_shape(response, 422, "input")
    assert "input[1]" in response.json()["error"]["message"]
    assert "256" in response.json()["error"]["message"]


# --- load shedding: the online queue past max_online_depth
STALLED_QUEUE = f"online-stalled-{os.getpid()}"


@pytest.fixture(scope="module")
def stalled(cluster: Cluster) -> Iterator[ApiServer]:
    """An API whose online queue no worker reads: every miss stays queued."""
    server = _server(
        cluster.env, cluster.tmp / "api-stalled.log",
        online_queue=STALLED_QUEUE, max_online_depth=1, request_timeout_s=2,
    )
    try:
        yield server
    finally:
        server.stop()


def test_a_deep_online_queue_answers_429_with_retry_after(
    stalled: ApiServer, cluster: Cluster, salt: str
) -> None:
    # The queue starts empty, also when this test runs again on the same server
    # (`make test-repeat`): what an earlier run left there would shed its first request.
    with Connection(cluster.env["EMBEDQ_BROKER_URL"]) as broker:
        broker.default_channel.queue_purge(STALLED_QUEUE)

    def one(i: int) -> httpx.Response:
        return httpx.post(stalled.url + "/v1/embeddings",
                          json={"input": f"{salt} stalled {i}"}, timeout=60)

    # One after the other, so each is its own queue message (concurrent requests would be
    # coalesced into fewer messages).
    timed_out = [one(0), one(1)]
    for response in timed_out:  # no worker: each waits out the request timeout
        assert_error_shape(response, 503)
        assert response.json()["error"]["code"] == "embedding_timeout"
        assert int(response.headers["Retry-After"]) >= 1
    shed = one(99)
    assert_error_shape(shed, 429)
    assert int(shed.headers["Retry-After"]) >= 1
    assert "EMBEDQ_MAX_ONLINE_DEPTH" in shed.json()["error"]["message"]


# --- the database goes down under a running API
@pytest.fixture(scope="module")
def db_proxy(cluster: Cluster) -> Iterator[TcpProxy]:
    url = make_url(cluster.env["EMBEDQ_DATABASE_URL"])
    proxy = TcpProxy(url.host or "127.0.0.1", url.port or 5432).start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture(scope="module")
def proxied(cluster: Cluster, db_proxy: TcpProxy) -> Iterator[ApiServer]:
    """An API that reaches Postgres through a proxy the test can cut."""
    url = make_url(cluster.env["EMBEDQ_DATABASE_URL"]).set(port=db_proxy.port)
    server = _server(cluster.env, cluster.tmp / "api-proxied-db.log",
                     database_url=url.render_as_string(hide_password=False))
    try:
        yield server
    finally:
        server.stop()


def test_a_down_database_is_503_with_retry_after_then_recovers(
    proxied: ApiServer, db_proxy: TcpProxy, salt: str
) -> None:
    def embed(text: str) -> httpx.Response:
        return httpx.post(proxied.url + "/v1/embeddings", json={"input": text}, timeout=60)

    before = f"{salt} stored before the outage"
    assert embed(before).status_code == 200
    db_proxy.stop()
    try:
        response = embed(f"{salt} during the outage")
        assert_error_shape(response, 503)
        assert int(response.headers["Retry-After"]) >= 1
        assert "database" in response.json()["error"]["message"]
        ready = httpx.get(proxied.url + "/readyz", timeout=30)
        assert_error_shape(ready, 503)
        assert ready.json()["checks"]["database"] != "ok"
        assert "database" in ready.json()["error"]["message"]
        assert httpx.get(proxied.url + "/healthz").status_code == 200
        # What the hot tier already holds is still answered.
        assert embed(before).status_code == 200
    finally:
        db_proxy.start()
    assert embed(f"{salt} during the outage").status_code == 200
    assert httpx.get(proxied.url + "/readyz", timeout=30).status_code == 200


# --- embedded mode: no servers at all
@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    tmp = tmp_path_factory.mktemp("embedded-api")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDQ_")}
    env.update({"EMBEDQ_ENCODER": "hashing", "EMBEDQ_DATA_DIR": str(tmp)})
    with ApiServer(env, tmp / "api.log") as server:
        yield server


def test_embedded_mode_serves_and_is_ready(embedded: ApiServer, salt: str) -> None:
    # Texts of this run's own: no earlier run on this server makes them hot hits.
    response = httpx.post(embedded.url + "/v1/embeddings", timeout=60,
                          json={"input": [f"{salt} embedded one", f"{salt} embedded two"]})
    assert response.status_code == 200, response.text
    assert len(response.json()["data"]) == 2
    ready = httpx.get(embedded.url + "/readyz", timeout=30)
    assert ready.status_code == 200, ready.text
    metrics = httpx.get(embedded.url + "/metrics").text
    assert 'embedq_queue_depth{queue="online' in metrics  # the batcher's backlog
    assert 'embedq_cache_hits_total{tier="hot"} 0.0' in metrics
