"""Tenants and API keys, end to end: two `embedq serve` processes and an `embedq mcp`
over HTTP on a database, queues and worker of their own, keys made by `embedq keys`.

The matrix: every route and MCP tool, called with the owner's key (allowed), another
tenant's (404, as for what does not exist), a key without the scope (403) and no key
(401). Then revocation seen by a second process within a second, a 16 MB body refused
before it is read, and the bootstrap keys of EMBEDQ_API_KEYS.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import support
from tests.integration.test_api_support import ApiServer

pytestmark = pytest.mark.integration

BOOT = "bootstrap-test-key"
FULL = "embed,jobs,cache:read,cache:write"


@dataclass
class Tenants:
    env: dict[str, str]
    tmp: Path
    a: ApiServer  # two API processes on one database
    b: ApiServer
    keys: dict[str, str]


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "embedq.cli", *args], env=env, text=True,
                          capture_output=True, cwd=support.ROOT, timeout=60, check=False)


def create_key(env: dict[str, str], tenant: str, scopes: str, *more: str) -> str:
    done = cli(env, "keys", "create", "--tenant", tenant, "--scopes", scopes, "--json", *more)
    assert done.returncode == 0, done.stderr
    key: str = json.loads(done.stdout)["key"]
    return key


@pytest.fixture(scope="module")
def tn(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tenants]:
    support.check_postgres()
    tmp = tmp_path_factory.mktemp("tenants")
    with support.temporary_database() as pg_url:
        env = support.cluster_env(redis_url, pg_url, online_queue="online-tenants",
                                  bulk_queue="bulk-tenants", api_keys=BOOT,
                                  semantic_index="exact", semantic_sync_interval_s=0.1)
        keys = {
            "alice": create_key(env, "alice", FULL, "--name", "alice-main"),
            "bob": create_key(env, "bob", FULL),
            "alice_embed": create_key(env, "alice", "embed"),
            "alice_cache": create_key(env, "alice", "cache:read,cache:write"),
        }
        worker = support.WorkerProcess(env, tmp / "worker.log").start()
        a = ApiServer(env, tmp / "api-a.log")
        b = ApiServer(env, tmp / "api-b.log")
        try:
            a.start()
            b.start()
            yield Tenants(env, tmp, a, b, keys)
        finally:
            a.stop()
            b.stop()
            worker.stop()


def auth(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def call(api: ApiServer, method: str, path: str, key: str | None, **kw: Any) -> httpx.Response:
    return httpx.request(method, api.url + path, headers=auth(key), timeout=60, **kw)


def jsonl(n: int, salt: str) -> bytes:
    lines = [{"custom_id": f"r{i}", "method": "POST", "url": "/v1/embeddings",
              "body": {"input": f"{salt} batch {i}"}} for i in range(n)]
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def alice_resources(tn: Tenants, salt: str) -> dict[str, str]:
    """A job, an uploaded file, a batch and a namespace with one entry, all alice's."""
    key = tn.keys["alice"]
    job = call(tn.a, "POST", "/v1/jobs", key, json={"input": [f"{salt} job"]})
    assert job.status_code == 202, job.text
    upload = call(tn.a, "POST", "/v1/files", key, data={"purpose": "batch"},
                  files={"file": ("r.jsonl", jsonl(2, salt))})
    assert upload.status_code == 200, upload.text
    batch = call(tn.a, "POST", "/v1/batches", key, json={
        "input_file_id": upload.json()["id"], "endpoint": "/v1/embeddings",
        "completion_window": "24h"})
    assert batch.status_code == 200, batch.text
    entry = call(tn.a, "PUT", f"/v1/semantic-cache/ns{salt}", key,
                 json={"query": f"{salt} where is the invoice", "payload": "billing"})
    assert entry.status_code == 200, entry.text
    return {"job": job.json()["id"], "file": upload.json()["id"],
            "batch": batch.json()["id"], "ns": f"ns{salt}", "entry": str(entry.json()["id"])}


def owned_routes(r: dict[str, str], salt: str) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(scope, method, path, request) for every route that reads or changes one resource;
    read-only ones first, so the owner's own calls do not delete what later ones need."""
    ns, lookup = r["ns"], {"json": {"query": f"{salt} where is the invoice"}}
    return [
        ("jobs", "GET", f"/v1/jobs/{r['job']}", {}),
        ("jobs", "GET", f"/v1/jobs/{r['job']}/results", {}),
        ("jobs", "GET", f"/v1/jobs/{r['job']}/events", {}),
        ("jobs", "GET", f"/v1/files/{r['file']}", {}),
        ("jobs", "GET", f"/v1/files/{r['file']}/content", {}),
        ("jobs", "GET", f"/v1/batches/{r['batch']}", {}),
        ("jobs", "POST", "/v1/batches", {"json": {
            "input_file_id": r["file"], "endpoint": "/v1/embeddings",
            "completion_window": "24h"}}),
        ("cache:read", "POST", f"/v1/semantic-cache/{ns}/lookup", lookup),
        ("cache:read", "GET", f"/v1/semantic-cache/{ns}/stats", {}),
        ("cache:write", "PUT", f"/v1/semantic-cache/{ns}", {"json": {
            "query": f"{salt} another question", "payload": 1}}),
        ("jobs", "POST", f"/v1/batches/{r['batch']}/cancel", {}),
        ("jobs", "DELETE", f"/v1/jobs/{r['job']}", {}),
        ("cache:write", "DELETE", f"/v1/semantic-cache/{ns}/{r['entry']}", {}),
        ("jobs", "DELETE", f"/v1/files/{r['file']}", {}),
        ("cache:write", "DELETE", f"/v1/semantic-cache/{ns}", {}),
    ]


def test_each_route_answers_owner_other_tenant_missing_scope_and_no_key(
        tn: Tenants, salt: str) -> None:
    resources = alice_resources(tn, salt)
    routes = owned_routes(resources, salt)
    lacking = {"jobs": tn.keys["alice_cache"], "cache:read": tn.keys["alice_embed"],
               "cache:write": tn.keys["alice_embed"]}
    for scope, method, path, request in routes:
        assert call(tn.a, method, path, None, **request).status_code == 401, path
        wrong = call(tn.b, method, path, lacking[scope], **request)
        assert wrong.status_code == 403, (path, wrong.text)
        assert scope in wrong.json()["error"]["message"]
        other = call(tn.b, method, path, tn.keys["bob"], **request)
        assert other.status_code == 404, (method, path, other.text)
        assert other.json()["error"]["code"] == "not_found"
    for _, method, path, request in routes:  # and then the owner, on either process
        answer = call(tn.a, method, path, tn.keys["alice"], **request)
        assert answer.status_code in (200, 204), (method, path, answer.text)


def test_lists_show_only_the_callers_own(tn: Tenants, salt: str) -> None:
    r = alice_resources(tn, salt)
    for path, own in (("/v1/files", r["file"]), ("/v1/batches", r["batch"]),
                      ("/v1/jobs", r["job"])):
        mine = {x["id"] for x in call(tn.a, "GET", path, tn.keys["alice"]).json()["data"]}
        theirs = {x["id"] for x in call(tn.a, "GET", path, tn.keys["bob"]).json()["data"]}
        assert own in mine and own not in theirs
    # Another tenant's file or job is as absent as a cursor as it is by id.
    assert call(tn.a, "GET", f"/v1/files?after={r['file']}", tn.keys["bob"]).status_code == 404
    assert call(tn.a, "GET", f"/v1/jobs?after={r['job']}", tn.keys["bob"]).status_code == 404


def test_each_authenticated_request_leaves_one_audit_line(tn: Tenants, salt: str) -> None:
    text = f"{salt} secret text"
    job = call(tn.a, "POST", "/v1/jobs", tn.keys["alice"], json={"input": [text, "x"]})
    call(tn.a, "GET", f"/v1/jobs/{job.json()['id']}", tn.keys["alice"])
    support.wait_until(lambda: "route=/v1/jobs/{job_id} status=200" in tn.a.log(), 5,
                       "the audit line of the read")
    lines = [line for line in tn.a.log().splitlines() if "embedq.audit" in line]
    assert any("tenant=alice key=alice-main method=POST route=/v1/jobs status=202 inputs=2"
               in line for line in lines), lines[-5:]
    log = tn.a.log()
    assert text not in log and tn.keys["alice"] not in log
    created = cli(tn.env, "--loglevel", "info", "keys", "create", "--tenant", "dave")
    assert "key created" in created.stderr and "tenant=dave" in created.stderr
    assert created.stdout.strip() not in created.stderr


def test_embeddings_metrics_and_readiness_by_scope(tn: Tenants, salt: str) -> None:
    body = {"input": [f"{salt} embed me"]}
    assert call(tn.a, "POST", "/v1/embeddings", tn.keys["alice_embed"], json=body
                ).status_code == 200
    assert call(tn.a, "POST", "/v1/embeddings", tn.keys["alice_cache"], json=body
                ).status_code == 403
    assert call(tn.a, "POST", "/embed", tn.keys["alice_cache"], json={"inputs": "x"}
                ).json()["error_type"] == "Forbidden"
    assert call(tn.a, "GET", "/metrics", tn.keys["alice"]).status_code == 403
    assert call(tn.a, "GET", "/metrics", BOOT).status_code == 200
    assert call(tn.a, "GET", "/readyz", None).json() == {"status": "ready"}
    assert call(tn.a, "GET", "/readyz", tn.keys["alice"]).json() == {"status": "ready"}
    assert "checks" in call(tn.a, "GET", "/readyz", BOOT).json()


def test_the_bootstrap_key_is_the_default_tenant_with_every_scope(tn: Tenants, salt: str
                                                                  ) -> None:
    job = call(tn.a, "POST", "/v1/jobs", BOOT, json={"input": [f"{salt} boot"]}).json()["id"]
    assert call(tn.b, "GET", f"/v1/jobs/{job}", BOOT).status_code == 200
    assert call(tn.b, "GET", f"/v1/jobs/{job}", tn.keys["alice"]).status_code == 404
    listed = cli(tn.env, "jobs", "list", "--json", "--tenant", "default")
    assert job in {row["id"] for row in json.loads(listed.stdout)}
    assert job not in {row["id"] for row in json.loads(
        cli(tn.env, "jobs", "list", "--json", "--tenant", "alice").stdout)}
    assert call(tn.a, "GET", "/v1/models", "bootstrap-test-ke").status_code == 401


def test_a_revoked_key_is_refused_by_every_process_within_a_second(tn: Tenants) -> None:
    key = create_key(tn.env, "carol", "embed")
    key_id = next(k["id"] for k in json.loads(
        cli(tn.env, "keys", "list", "--tenant", "carol", "--json").stdout))
    for api in (tn.a, tn.b):
        assert call(api, "GET", "/v1/models", key).status_code == 200
    assert key not in cli(tn.env, "keys", "list").stdout  # never shown again
    done = cli(tn.env, "keys", "revoke", key_id)
    revoked_at = time.monotonic()
    assert done.returncode == 0, done.stderr
    for api in (tn.b, tn.a):
        support.wait_until(lambda api=api: call(api, "GET", "/v1/models", key  # type: ignore[misc]
                                                ).status_code == 401, 5, "revocation seen")
    assert time.monotonic() - revoked_at < 1.5


def test_an_unauthenticated_16_mb_body_is_refused_before_it_is_read(tn: Tenants) -> None:
    """The headers announce 16 MB but only 64 KiB is sent: an answer that comes anyway
    cannot have waited for the body. With a key, the server does wait for it."""

    def first_line(key: str | None) -> bytes:
        head = (f"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                f"\r\nContent-Length: {16_000_000}\r\n"
                + (f"Authorization: Bearer {key}\r\n" if key else "") + "\r\n")
        with socket.create_connection(("127.0.0.1", tn.a.port), timeout=3) as sock:
            sock.sendall(head.encode() + b"[" * 65_536)
            try:
                return sock.recv(64).split(b"\r\n")[0]
            except TimeoutError:
                return b"(no answer: reading the body)"

    assert first_line(None) == b"HTTP/1.1 401 Unauthorized"
    assert first_line("wrong") == b"HTTP/1.1 401 Unauthorized"
    assert first_line(tn.keys["alice"]) == b"(no answer: reading the body)"


def test_a_keys_rate_limit_is_shared_by_the_api_processes(tn: Tenants) -> None:
    """2 requests a second (a burst of 2): 12 requests as fast as they go, alternating
    between the two processes, get about 2 through; buckets per process would pass 4+."""
    key = create_key(tn.env, "erin", "embed", "--rate", "2")
    started = time.monotonic()
    answers = [call((tn.a, tn.b)[n % 2], "GET", "/v1/models", key) for n in range(12)]
    elapsed = time.monotonic() - started
    passed = sum(a.status_code == 200 for a in answers)
    limited = [a for a in answers if a.status_code == 429]
    assert passed + len(limited) == 12
    assert 2 <= passed <= 2 + 2 * elapsed + 1, (passed, elapsed)
    assert limited[0].headers["Retry-After"] == "1"
    assert limited[0].json()["error"]["code"] == "rate_limit_exceeded"
    assert "--rate" in limited[0].json()["error"]["message"]
    support.wait_until(lambda: call(tn.b, "GET", "/v1/models", key).status_code == 200, 5,
                       "the key's bucket refilling", interval_s=0.25)


# --- MCP over HTTP
@contextlib.contextmanager
def mcp_server(env: dict[str, str], log: Path, *args: str) -> Iterator[int]:
    from tests.integration.test_mcp_http import wait_listening

    port = support.free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "embedq.cli", "mcp", "--transport", "http", "--port",
         str(port), *args], env=env, cwd=support.ROOT, stdout=log.open("ab"),
        stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_listening(port, proc, log, 60)
        yield port
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


async def mcp_calls(port: int, key: str | None, calls: list[tuple[str, dict[str, Any]]]
                    ) -> list[tuple[bool, str]]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    transport = streamable_http_client(f"http://127.0.0.1:{port}/mcp",
                                       http_client=create_mcp_http_client(headers=auth(key)))
    out = []
    async with Client(transport, read_timeout_seconds=60) as client:  # type: ignore[arg-type]
        for name, arguments in calls:
            result = await client.call_tool(name, arguments)
            out.append((bool(result.is_error), str(result.content[0].text)))  # type: ignore[union-attr]
    return out


def test_mcp_over_http_needs_a_key_and_keeps_tenants_apart(tn: Tenants, salt: str) -> None:
    r = alice_resources(tn, salt)
    tools: list[tuple[str, dict[str, Any]]] = [
        ("embed_text", {"text": f"{salt} mcp"}),
        ("job_status", {"job_id": r["job"]}),
        ("semantic_cache_lookup", {"namespace": r["ns"], "query": f"{salt} where is the invoice"}),
        ("semantic_cache_store", {"namespace": r["ns"], "query": f"{salt} q2", "payload": 2}),
    ]
    with mcp_server(tn.env, tn.tmp / "mcp.log") as port:
        with pytest.raises(Exception):  # noqa: B017 - the SDK's error for a 401
            asyncio.run(mcp_calls(port, None, tools[:1]))
        raw = httpx.post(f"http://127.0.0.1:{port}/mcp", json={}, timeout=10)
        assert raw.status_code == 401
        owner = asyncio.run(mcp_calls(port, tn.keys["alice"], tools))
        [nul] = asyncio.run(mcp_calls(port, tn.keys["alice"],
                                      [("job_status", {"job_id": "a\x00b"})]))
        other = asyncio.run(mcp_calls(port, tn.keys["bob"], tools))
        scoped = asyncio.run(mcp_calls(port, tn.keys["alice_embed"], tools))
    assert [error for error, _ in owner] == [False] * 4, owner
    assert nul[0] and "does not exist" in nul[1], nul  # an id that cannot exist: clear
    assert json.loads(owner[2][1])["hit"] is True
    assert not other[0][0]  # embedding needs no resource
    for error, text in other[1:]:
        assert error and ("does not exist" in text or "not one of this tenant's" in text), text
    assert not scoped[0][0]
    for (error, text), scope in zip(scoped[1:], ["jobs", "cache:read", "cache:write"],
                                    strict=True):
        assert error and f"lacks the scope {scope!r}" in text, text


def test_serve_and_mcp_refuse_to_listen_openly_beyond_loopback(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDQ_")}
    env.update(EMBEDQ_DATA_DIR=str(tmp_path), EMBEDQ_ENCODER="hashing")
    for args in (["serve", "--host", "0.0.0.0"],
                 ["mcp", "--transport", "http", "--host", "0.0.0.0"]):
        done = cli(env, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert "anyone who can reach it" in done.stderr
