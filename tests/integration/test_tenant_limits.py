"""Tenants' limits, end to end: caps on what a tenant keeps, a key's texts a day, strict
isolation of the exact cache, and the MCP transport behind the API's rate limit and audit.

Two `embedq serve` processes share one database, queues and worker: `shared` with the
default isolation and small caps, `strict` with EMBEDQ_TENANT_ISOLATION=strict. The worker
is not told the isolation: the tenant reaches it in each message's spec.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from tests import support
from tests.integration.test_api_support import ApiServer
from tests.integration.test_tenants import (
    FULL,
    call,
    create_key,
    jsonl,
    mcp_calls,
    mcp_server,
)

pytestmark = pytest.mark.integration

CAPS = {"tenant_max_namespaces": 2, "tenant_max_entries": 3, "tenant_max_queued_inputs": 5}


@dataclass
class Cluster:
    env: dict[str, str]
    tmp: Path
    shared: ApiServer
    strict: ApiServer
    ledger: Path
    redis_url: str


@pytest.fixture(scope="module")
def cl(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    support.check_postgres()
    tmp = tmp_path_factory.mktemp("tenant-limits")
    ledger = tmp / "ledger"
    with support.temporary_database() as pg_url:
        env = support.cluster_env(redis_url, pg_url, online_queue="online-limits",
                                  bulk_queue="bulk-limits", api_keys="boot-limits",
                                  semantic_index="exact", semantic_sync_interval_s=0.1,
                                  ledger_path=ledger, **CAPS)
        worker = support.WorkerProcess(env, tmp / "worker.log").start()
        shared = ApiServer(env, tmp / "api-shared.log")
        strict = ApiServer({**env, "EMBEDQ_TENANT_ISOLATION": "strict"},
                           tmp / "api-strict.log")
        try:
            shared.start()
            strict.start()
            yield Cluster(env, tmp, shared, strict, ledger, redis_url)
        finally:
            shared.stop()
            strict.stop()
            worker.stop()


def passes(cl: Cluster, text: str) -> int:
    """Forward passes the worker made for `text`."""
    return support.ledger_counts(cl.ledger).get(hashlib.sha256(text.encode()).hexdigest(), 0)


def refused(answer: Any, status: int, code: str, *needles: str) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    error: dict[str, Any] = answer.json()["error"]
    assert error["code"] == code, error
    for needle in needles:
        assert needle in error["message"], error["message"]
    return error


# --- caps on what a tenant keeps
def test_a_tenants_namespaces_are_capped_counting_only_its_own(cl: Cluster, salt: str
                                                                ) -> None:
    alice, bob = create_key(cl.env, f"ns-a{salt}", FULL), create_key(cl.env, f"ns-b{salt}", FULL)

    def put(key: str, ns: str, query: str) -> Any:
        return call(cl.shared, "PUT", f"/v1/semantic-cache/{ns}{salt}", key,
                    json={"query": f"{salt} {query}", "payload": query})

    assert put(alice, "a1", "first").status_code == 200
    assert put(alice, "a2", "second").status_code == 200
    refused(put(alice, "a3", "third"), 409, "namespace_limit",
            "EMBEDQ_TENANT_MAX_NAMESPACES=2", "owns 2 namespaces", "DELETE")
    assert put(alice, "a1", "more in an owned one").status_code == 200
    assert put(bob, "b1", "first").status_code == 200  # bob's count is his own
    hit = call(cl.shared, "POST", f"/v1/semantic-cache/a1{salt}/lookup", alice,
               json={"query": f"{salt} first", "threshold": 1.0})
    assert hit.json()["hit"] is True  # the refusal took nothing away
    assert call(cl.shared, "DELETE", f"/v1/semantic-cache/a2{salt}", alice).status_code == 200
    assert put(alice, "a3", "third").status_code == 200


def test_a_tenants_live_entries_are_capped_without_evicting_any(cl: Cluster, salt: str
                                                                 ) -> None:
    carol, dan = create_key(cl.env, f"en-c{salt}", FULL), create_key(cl.env, f"en-d{salt}", FULL)

    def put(key: str, ns: str, query: str, payload: int = 1) -> Any:
        return call(cl.shared, "PUT", f"/v1/semantic-cache/{ns}{salt}", key,
                    json={"query": f"{salt} {query}", "payload": payload})

    for ns, query in (("c1", "q1"), ("c1", "q2"), ("c2", "q3")):
        assert put(carol, ns, query).status_code == 200
    refused(put(carol, "c2", "q4"), 409, "limit_reached",
            "EMBEDQ_TENANT_MAX_ENTRIES=3", "keeps 3 live")
    assert put(carol, "c1", "q1", payload=2).status_code == 200  # a replacement adds none
    for n in range(3):
        assert put(dan, "d1", f"dan {n}").status_code == 200
    for ns, query in (("c1", "q1"), ("c1", "q2"), ("c2", "q3")):
        found = call(cl.shared, "POST", f"/v1/semantic-cache/{ns}{salt}/lookup", carol,
                     json={"query": f"{salt} {query}", "threshold": 1.0}).json()
        assert found["hit"], (ns, query)
    stats = call(cl.shared, "GET", f"/v1/semantic-cache/c1{salt}/stats", carol).json()
    assert stats["entries"] == 2


def test_a_tenants_queued_job_inputs_are_capped(cl: Cluster, salt: str) -> None:
    erin, fay = create_key(cl.env, f"q-e{salt}", FULL), create_key(cl.env, f"q-f{salt}", FULL)
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()

    def submit(key: str, n: int) -> Any:
        return call(cl.shared, "POST", "/v1/jobs", key, json={
            "input": [f"{salt} job {i}" for i in range(n)], "not_before": later})

    first = submit(erin, 3)
    assert first.status_code == 202, first.text
    over = submit(erin, 3)
    refused(over, 429, "queue_limit_exceeded", "EMBEDQ_TENANT_MAX_QUEUED_INPUTS=5",
            "3 inputs in unfinished jobs")
    assert over.headers["Retry-After"] == "60"
    assert submit(fay, 5).status_code == 202  # fay's queue is her own
    upload = call(cl.shared, "POST", "/v1/files", erin, data={"purpose": "batch"},
                  files={"file": ("r.jsonl", jsonl(3, salt))})
    batch = {"input_file_id": upload.json()["id"], "endpoint": "/v1/embeddings",
             "completion_window": "24h"}
    refused(call(cl.shared, "POST", "/v1/batches", erin, json=batch), 429,
            "queue_limit_exceeded")
    assert call(cl.shared, "GET", "/v1/batches", erin).json()["data"] == []  # none stored
    assert submit(erin, 2).status_code == 202  # exactly at the cap
    job = first.json()["id"]
    assert call(cl.shared, "GET", f"/v1/jobs/{job}", erin).json()["status"] == "queued"
    assert call(cl.shared, "DELETE", f"/v1/jobs/{job}", erin).status_code == 200
    created = call(cl.shared, "POST", "/v1/batches", erin, json=batch)
    assert created.status_code == 200, created.text
    support.wait_until(lambda: "inputs=3" in _audit(cl.shared, "/v1/batches", "POST"), 5,
                       "the batch's audit line")


def _audit(api: ApiServer, route: str, method: str) -> str:
    lines = [line for line in api.log().splitlines()
             if "embedq.audit" in line and f"method={method} route={route} " in line]
    return lines[-1] if lines else ""


# --- texts a day
def test_a_keys_texts_a_day_are_counted_across_processes_and_routes(cl: Cluster, salt: str
                                                                    ) -> None:
    key = create_key(cl.env, f"day{salt}", "embed,jobs", "--texts-per-day", "5")
    texts = [f"{salt} day {i}" for i in range(6)]
    assert call(cl.shared, "POST", "/v1/embeddings", key,
                json={"input": texts[:3]}).status_code == 200
    over = call(cl.strict, "POST", "/v1/embeddings", key, json={"input": texts[3:6]})
    refused(over, 429, "daily_limit_exceeded", "limited to 5 texts a day", "sent 3 today",
            "--texts-per-day")
    now = datetime.now(UTC)
    midnight = datetime(now.year, now.month, now.day, tzinfo=UTC) + timedelta(days=1)
    assert abs(int(over.headers["Retry-After"]) - (midnight - now).total_seconds()) < 5
    # A refused request counts nothing: two more texts still fit, by the other process.
    tei = call(cl.strict, "POST", "/embed", key, json={"inputs": texts[3:5]})
    assert tei.status_code == 200, tei.text
    tei_over = call(cl.shared, "POST", "/embed", key, json={"inputs": texts[5]})
    assert tei_over.status_code == 429 and "5 texts a day" in tei_over.json()["error"]
    refused(call(cl.shared, "POST", "/v1/jobs", key, json={"input": ["one more"]}), 429,
            "daily_limit_exceeded")
    store = redis.Redis.from_url(cl.redis_url)
    counters = [k for k in store.scan_iter("embedq:texts:*") if b":" + now.strftime(
        "%Y-%m-%d").encode() in k]
    assert [int(store.get(k) or 0) for k in counters if store.get(k) == b"5"] == [5]
    assert all(0 < store.ttl(k) <= 2 * 86_400 for k in counters)
    assert "inputs=2" in _audit(cl.strict, "/embed", "POST")


# --- strict isolation
def test_strict_isolation_gives_each_tenant_its_own_exact_cache(cl: Cluster, salt: str
                                                                 ) -> None:
    alice = create_key(cl.env, f"iso-a{salt}", FULL)
    bob = create_key(cl.env, f"iso-b{salt}", FULL)

    def embed(api: ApiServer, key: str, text: str) -> list[float]:
        answer = call(api, "POST", "/v1/embeddings", key, json={"input": text})
        assert answer.status_code == 200, answer.text
        vector: list[float] = answer.json()["data"][0]["embedding"]
        return vector

    strict_text, shared_text = f"{salt} the same words", f"{salt} shared words"
    first = embed(cl.strict, alice, strict_text)
    assert passes(cl, strict_text) == 1
    assert embed(cl.strict, alice, strict_text) == first
    assert passes(cl, strict_text) == 1  # alice's own cache answered
    assert embed(cl.strict, bob, strict_text) == first  # same model, same vector...
    assert passes(cl, strict_text) == 2  # ...computed again for bob: a miss of his own
    assert embed(cl.shared, bob, strict_text) == first
    assert passes(cl, strict_text) == 3  # and the shared cache is a third key space

    embed(cl.shared, alice, shared_text)
    embed(cl.shared, bob, shared_text)
    assert passes(cl, shared_text) == 1  # shared: one computation for both

    # The semantic cache embeds the query with the caller's fingerprint: alice's put
    # reuses her vector, bob's computes his own.
    for key, ns in ((alice, "iso-a"), (bob, "iso-b")):
        put = call(cl.strict, "PUT", f"/v1/semantic-cache/{ns}{salt}", key,
                   json={"query": strict_text, "payload": 1})
        assert put.status_code == 200, put.text
    assert passes(cl, strict_text) == 3
    # Jobs too: bob's job text is new to his key space only.
    job_text = f"{salt} job words"
    embed(cl.strict, alice, job_text)
    job = call(cl.strict, "POST", "/v1/jobs", bob, json={"input": [job_text]}).json()["id"]
    support.wait_until(lambda: call(cl.strict, "GET", f"/v1/jobs/{job}", bob).json()[
        "status"] == "succeeded", 30, "bob's job")
    assert passes(cl, job_text) == 2
    rows = call(cl.strict, "GET", f"/v1/jobs/{job}/results", bob).json()["data"]
    assert rows[0]["embedding"] == embed(cl.strict, alice, job_text)


# --- MCP over HTTP
def test_mcp_over_http_shares_the_api_rate_limit_and_audit(cl: Cluster, salt: str) -> None:
    import httpx

    slow = create_key(cl.env, f"mcp-r{salt}", "embed", "--rate", "1")
    key = create_key(cl.env, f"mcp{salt}", FULL, "--name", f"mcp-key-{salt}")
    daily = create_key(cl.env, f"mcp-d{salt}", "embed", "--texts-per-day", "1")
    log = cl.tmp / f"mcp-{salt}.log"
    with mcp_server(cl.env, log) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        # One bucket for the key, whichever process it calls: the API takes the token.
        assert call(cl.shared, "GET", "/v1/models", slow).status_code == 200
        limited = httpx.post(url, json={}, timeout=10,
                             headers={"Authorization": f"Bearer {slow}"})
        refused(limited, 429, "rate_limit_exceeded", "--rate")
        assert limited.headers["Retry-After"] == "1"
        results = asyncio.run(mcp_calls(port, key, [
            ("embed_texts", {"texts": [f"{salt} m1", f"{salt} m2"]}),
            ("semantic_cache_store", {"namespace": f"mcp{salt}", "query": f"{salt} q",
                                      "payload": 1}),
            ("semantic_cache_lookup", {"namespace": f"mcp{salt}", "query": f"{salt} q"}),
        ]))
        assert [error for error, _ in results] == [False] * 3, results
        over = asyncio.run(mcp_calls(port, daily, [
            ("embed_texts", {"texts": [f"{salt} d1", f"{salt} d2"]})]))
        assert over[0][0] and "limited to 1 texts a day" in over[0][1], over
    lines = [line for line in log.read_text().splitlines() if "embedq.audit" in line]
    mine = [line for line in lines if f"key=mcp-key-{salt} " in line]
    assert any("route=/mcp status=200 inputs=2" in line for line in mine), mine
    assert sum("route=/mcp status=200 inputs=1" in line for line in mine) == 2, mine
    assert key not in log.read_text()
    # The HTTP API's semantic routes say how many texts they took, too.
    put = call(cl.shared, "PUT", f"/v1/semantic-cache/http{salt}", key,
               json={"query": f"{salt} q", "payload": 1})
    assert put.status_code == 200
    call(cl.shared, "POST", f"/v1/semantic-cache/http{salt}/lookup", key,
         json={"query": f"{salt} q"})
    support.wait_until(lambda: "inputs=1" in _audit(
        cl.shared, "/v1/semantic-cache/{namespace}/lookup", "POST"), 5, "the lookup's line")
    assert "inputs=1" in _audit(cl.shared, "/v1/semantic-cache/{namespace}", "PUT")

