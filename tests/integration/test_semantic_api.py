"""/v1/semantic-cache on two real `embedq serve` processes sharing Redis and Postgres."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from embedq.config.groups import SemanticSettings
from tests.conftest import Cluster
from tests.integration.test_api_support import ApiServer

DEFAULT_THRESHOLD = SemanticSettings().threshold  # the configured default

pytestmark = pytest.mark.integration

CONVERGE_S = 1.0


@pytest.fixture(scope="module")
def two_apis(cluster: Cluster) -> Iterator[tuple[ApiServer, ApiServer]]:
    servers = []
    try:
        for name in ("a", "b"):
            env = dict(cluster.env, EMBEDQ_DATA_DIR=str(cluster.tmp / f"semantic-api-{name}"),
                       EMBEDQ_SEMANTIC_MAX_PAYLOAD_BYTES="2000")
            servers.append(ApiServer(env, cluster.tmp / f"semantic-api-{name}.log").start())
        yield servers[0], servers[1]
    finally:
        for server in servers:
            server.stop()


def _call(api: ApiServer, method: str, path: str, body: Any = None) -> httpx.Response:
    return httpx.request(method, f"{api.url}/v1/semantic-cache/{path}", json=body, timeout=30)


def _lookup(api: ApiServer, ns: str, query: str, **extra: Any) -> dict[str, Any]:
    got = _call(api, "POST", f"{ns}/lookup", {"query": query, **extra})
    assert got.status_code == 200, got.text
    result: dict[str, Any] = got.json()
    return result


def _wait_for(api: ApiServer, ns: str, query: str, hit: bool) -> float:
    started = time.monotonic()
    while _lookup(api, ns, query)["hit"] is not hit:
        elapsed = time.monotonic() - started
        assert elapsed < CONVERGE_S, f"process {api.url} did not converge within 1 s"
        time.sleep(0.02)
    return time.monotonic() - started


def test_a_write_in_one_process_is_found_by_the_other(two_apis: tuple[ApiServer, ApiServer],
                                                      salt: str) -> None:
    a, b = two_apis
    ns = f"http-{salt}"
    put = _call(a, "PUT", ns, {"query": "how do I open an account", "payload": {"n": 1},
                              "metadata": {"lang": "en"}})
    assert put.status_code == 200, put.text
    entry_id = put.json()["id"]
    _wait_for(b, ns, "how do I open an account", hit=True)
    [match] = _lookup(b, ns, "how do I open an account")["matches"]
    assert len(match.pop("hit_id")) == 32  # names this served hit in feedback
    assert match == {"id": entry_id, "score": pytest.approx(1.0, abs=1e-5),
                     "query": "how do I open an account", "payload": {"n": 1},
                     "metadata": {"lang": "en"}}
    assert _call(b, "DELETE", f"{ns}/{entry_id}").json() == {"id": entry_id, "deleted": True}
    _wait_for(a, ns, "how do I open an account", hit=False)
    _call(b, "PUT", ns, {"query": "second entry", "payload": 2})
    _wait_for(a, ns, "second entry", hit=True)
    assert _call(a, "DELETE", ns).json() == {"namespace": ns, "deleted": 1}
    _wait_for(b, ns, "second entry", hit=False)


def test_stats_over_http(two_apis: tuple[ApiServer, ApiServer], salt: str) -> None:
    a, _ = two_apis
    ns = f"stats-{salt}"
    _call(a, "PUT", ns, {"query": "counted", "payload": None})
    _lookup(a, ns, "counted")
    _lookup(a, ns, "something never stored here")
    stats = _call(a, "GET", f"{ns}/stats").json()
    assert (stats["entries"], stats["hits"], stats["misses"]) == (1, 1, 1)
    assert stats["index_kind"] == "flat" and stats["last_sync"]


@pytest.mark.parametrize(("method", "path", "body", "status", "says"), [
    ("PUT", "ns", {"query": "", "payload": 1}, 422, "query is empty"),
    ("PUT", "ns", {"query": "q", "payload": "x" * 3000}, 413, "limit is 2000"),
    ("PUT", "ns", {"query": "q"}, 422, "payload"),
    ("PUT", "ns", {"query": "q", "payload": 1, "ttl_s": -5}, 422, "ttl_s"),
    ("PUT", "bad%20name", {"query": "q", "payload": 1}, 422, "namespace"),
    ("POST", "ns/lookup", {"query": "q", "threshold": 1.5}, 422, "outside [-1, 1]"),
    ("POST", "ns/lookup", {"query": "q", "k": 0}, 422, "k 0"),
    ("DELETE", "ns/999999999", None, 404, "no entry 999999999"),
])
def test_bad_input_is_a_clear_4xx(two_apis: tuple[ApiServer, ApiServer], method: str,
                                  path: str, body: Any, status: int, says: str) -> None:
    got = _call(two_apis[0], method, path, body)
    assert got.status_code == status, got.text
    assert says in got.json()["error"]["message"]


def test_unknown_namespace_is_a_miss(two_apis: tuple[ApiServer, ApiServer], salt: str) -> None:
    assert _lookup(two_apis[0], f"never-{salt}", "anything") == {
        "hit": False, "threshold": pytest.approx(DEFAULT_THRESHOLD), "matches": [],
        "truncated": False}


def test_explain_lists_each_candidate_and_why_it_was_refused(
        two_apis: tuple[ApiServer, ApiServer], salt: str) -> None:
    a, _ = two_apis
    ns = f"explain-{salt}"
    opened = _call(a, "PUT", ns, {"query": "how do I open an account", "payload": 1}).json()
    other = _call(a, "PUT", ns, {"query": "recipes with lentils", "payload": 2}).json()
    got = _lookup(a, ns, "how do I close an account", threshold=-1.0, k=2, explain=True)
    why = {c["id"]: c for c in got["considered"]}
    assert why[opened["id"]]["refused"] == "guard"
    assert "'close' vs 'open'" in why[opened["id"]]["reason"]
    assert why[other["id"]]["refused"] is None
    assert [m["id"] for m in got["matches"]] == [other["id"]]
    strict = _lookup(a, ns, "how do I close an account", threshold=0.9999, explain=True)
    assert not strict["hit"]
    assert {c["refused"] for c in strict["considered"]} == {"below_threshold"}
    assert "considered" not in _lookup(a, ns, "how do I close an account")
