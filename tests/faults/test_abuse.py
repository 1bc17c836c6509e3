"""Scenario 9: abuse of the HTTP API. Oversized bodies (declared and streamed without a
length) are cut at the limit without the server's memory following them; every bad
input gets its 4xx; every route but health wants a key; hostile-looking texts are plain
data, stored and returned verbatim."""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from embedq.encoders.hashing import HashingEncoder
from tests.conftest import Cluster
from tests.faults.procs import peak_rss_bytes, reset_peak_rss, wait_until
from tests.faults.recorder import Recorder
from tests.integration.test_api_support import ApiServer

pytestmark = pytest.mark.integration

KEY = "abuse-key"
LIMIT_BYTES = 4 * 1024 * 1024
MAX_INPUTS = 64
MAX_INPUT_CHARS = 1000
HOSTILE = ["'); DROP TABLE jobs;--", "Robert'); DELETE FROM embeddings; --",
           "\" OR 1=1 --", "%s %s %(x)s {0} ${HOME} \\x00 \\u0000"]
NUL = "before\x00after"  # a real NUL character: Postgres text cannot hold it


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Iterator[ApiServer]:
    env = {**cluster.env, "EMBEDQ_API_KEYS": KEY, "EMBEDQ_MAX_BODY_BYTES": str(LIMIT_BYTES),
           "EMBEDQ_MAX_INPUTS": str(MAX_INPUTS), "EMBEDQ_MAX_INPUT_CHARS": str(MAX_INPUT_CHARS)}
    with ApiServer(env, cluster.tmp / "api-abuse.log") as server:
        yield server


def auth(key: str = KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def stream(api: ApiServer, total_bytes: int, *, chunked: bool) -> tuple[int, int]:
    """POST up to `total_bytes` of body (1 MiB writes) until the server answers; return
    (status, bytes sent)."""
    length = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {total_bytes}"
    head = (f"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1:{api.port}\r\n"
            f"Authorization: Bearer {KEY}\r\nContent-Type: application/json\r\n"
            f"{length}\r\n\r\n").encode()
    piece = b'{"input": "' + b"x" * (1024 * 1024 - 11)
    sent = 0
    with socket.create_connection(("127.0.0.1", api.port), timeout=60) as sock:
        sock.sendall(head)
        try:
            while sent < total_bytes:
                readable, _, _ = select.select([sock], [], [], 0)
                if readable:
                    break
                data = piece if sent == 0 else b"x" * len(piece)
                sock.sendall(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
                sent += len(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        sock.settimeout(30)
        status_line = sock.recv(65536).split(b"\r\n", 1)[0]
    return int(status_line.split()[1]), sent


def test_oversized_bodies_are_cut_without_memory_following(
    rep: int, record: Recorder, api: ApiServer
) -> None:
    assert api.proc is not None
    for _ in range(3):  # warm the server's paths so the peak measures the bodies only
        stream(api, 2 * LIMIT_BYTES, chunked=True)
        httpx.post(api.url + "/v1/embeddings", json={"input": "warm"}, headers=auth(),
                   timeout=60)
    # The warm-up's own bodies set a peak; the baseline is the resident set after them.
    reset_peak_rss(api.proc.pid)
    before = peak_rss_bytes(api.proc.pid)
    declared, declared_sent = stream(api, 50 * 1024 * 1024, chunked=False)
    chunked, chunked_sent = stream(api, 1024 * 1024 * 1024, chunked=True)
    growth = peak_rss_bytes(api.proc.pid) - before
    record.figure("rss_growth_mib", round(growth / 2**20, 2), limit=2 * LIMIT_BYTES / 2**20)
    record.figure("declared_mib_sent_before_cut", round(declared_sent / 2**20, 1))
    record.figure("chunked_mib_sent_before_cut", round(chunked_sent / 2**20, 1))
    assert (declared, chunked) == (413, 413)
    assert chunked_sent < 1024 * 1024 * 1024
    assert growth < 2 * LIMIT_BYTES, growth
    assert httpx.get(api.url + "/healthz").status_code == 200


def test_bad_inputs_get_their_4xx(rep: int, record: Recorder, api: ApiServer, salt: str) -> None:
    url = api.url + "/v1/embeddings"
    cases = {
        "too_many_inputs": (httpx.post(url, json={"input": ["a"] * (MAX_INPUTS + 1)},
                                       headers=auth()), 413),
        "text_over_limit": (httpx.post(url, json={"input": "y" * (MAX_INPUT_CHARS + 1)},
                                       headers=auth()), 413),
        "empty_string": (httpx.post(url, json={"input": ""}, headers=auth()), 422),
        "empty_in_list": (httpx.post(url, json={"input": [f"{salt} ok", ""]},
                                     headers=auth()), 422),
        "non_utf8": (httpx.post(url, content=b'{"input": "\xff\xfe\xc3"}',
                                headers={**auth(), "Content-Type": "application/json"}), 400),
        "wrong_content_type": (httpx.post(url, content=b"input=hello",
                                          headers={**auth(), "Content-Type":
                                                   "application/x-www-form-urlencoded"}), 415),
    }
    wrong = {name: r.status_code for name, (r, want) in cases.items() if r.status_code != want}
    record.figure("wrong_statuses", len(wrong), limit=0)
    assert not wrong, wrong
    for response, _ in cases.values():
        assert response.json()["error"]["message"]


def test_every_route_but_health_wants_a_key(rep: int, record: Recorder, api: ApiServer) -> None:
    paths = httpx.get(api.url + "/openapi.json", headers=auth()).json()["paths"]
    # /health: TEI's liveness route; / and /ping: GET only (the schema lists no other).
    open_paths = {"/healthz", "/readyz", "/health", "/", "/ping"}
    checked = 0
    leaks = []
    for path, operations in paths.items():
        concrete = path.replace("{", "").replace("}", "")  # any value: the key comes first
        for method in operations:
            if method not in {"get", "post", "put", "delete", "patch"}:
                continue
            for headers in ({}, auth("wrong-key"), {"Authorization": "Basic YWJ1c2Uta2V5"}):
                status = httpx.request(method.upper(), api.url + concrete, headers=headers,
                                       json={}).status_code
                checked += 1
                if (status == 401) == (path in open_paths):
                    leaks.append((method, path, headers, status))
    record.figure("routes_checked", checked, worse="lower")
    record.figure("key_leaks", len(leaks), limit=0)
    assert checked >= 20 and not leaks, leaks
    for path in open_paths:
        assert httpx.get(api.url + path, timeout=30).status_code == 200


def test_hostile_texts_are_stored_and_returned_verbatim(
    rep: int, record: Recorder, api: ApiServer, cluster: Cluster, salt: str
) -> None:
    texts = [f"{t} {salt}" for t in HOSTILE]
    items = [{"id": t, "text": t} for t in texts]
    submitted = httpx.post(api.url + "/v1/jobs", json={"input": items}, headers=auth(),
                           timeout=60)
    assert submitted.status_code == 202, submitted.text
    job_url = api.url + f"/v1/jobs/{submitted.json()['id']}"
    wait_until(lambda: httpx.get(job_url, headers=auth()).json()["status"] == "succeeded",
               60, "the job", interval_s=0.2)
    data = httpx.get(job_url + "/results", headers=auth()).json()["data"]
    enc = HashingEncoder()
    verbatim = 0
    for text, row in zip(texts, data, strict=True):
        raw = enc.encode([text])[0]
        np.testing.assert_allclose(row["embedding"], raw / np.linalg.norm(raw), rtol=1e-5,
                                   atol=1e-6)
        verbatim += row["id"] == text
    ns = f"abuse-{salt}"
    put = httpx.put(api.url + f"/v1/semantic-cache/{ns}",
                    json={"query": texts[0], "payload": {"answer": texts[1]}}, headers=auth())
    assert put.status_code == 200, put.text
    hit = httpx.post(api.url + f"/v1/semantic-cache/{ns}/lookup",
                     json={"query": texts[0], "threshold": 1.0}, headers=auth()).json()
    match = hit["matches"][0]
    verbatim += (match["query"], match["payload"]) == (texts[0], {"answer": texts[1]})
    # The jobs table is still there to answer after the texts went through it.
    listed = httpx.get(api.url + "/v1/jobs/" + submitted.json()["id"], headers=auth())
    # A NUL is data to the online path (only the vector is stored): its vector is that
    # of the text as sent. A job stores the text, so it refuses it and says what to do.
    nul = f"{NUL} {salt}"
    online = httpx.post(api.url + "/v1/embeddings", json={"input": nul}, headers=auth(),
                        timeout=60)
    assert online.status_code == 200, online.text
    raw = enc.encode([nul])[0]
    np.testing.assert_allclose(online.json()["data"][0]["embedding"],
                               raw / np.linalg.norm(raw), rtol=1e-5, atol=1e-6)
    verbatim += 1
    refused = httpx.post(api.url + "/v1/jobs", json={"input": [nul]}, headers=auth(),
                         timeout=60)
    message = refused.json()["error"]["message"]
    record.figure("verbatim", verbatim, worse="lower", limit=len(texts) + 2)
    assert verbatim == len(texts) + 2 and listed.status_code == 200
    assert 400 <= refused.status_code < 500 and "NUL" in message and "remove" in message, (
        refused.status_code, message)
