"""Nothing is stored that every reader cannot read back (a property, on Postgres).

Hypothesis generates the values a request can set (moments in any UTC offset and year,
texts with NUL and lone surrogates, ids, URLs, time zones, integers and floats past any
column, JSON) and sends them, as raw JSON, through every route that stores them: jobs,
semantic-cache entries and namespace configs, uploaded files and batches. Each answer is
a 2xx or a 4xx, never a 5xx; each thing stored is then read back through every reader:
its GET route and the list it is in, `embedq jobs list` (the JobService it calls), the
beat tick and export for jobs. Then a row written straight into Postgres, as an older
release might have, that no driver can load: the tick, the list and cancel go on.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from embedq.jobs.export import export
from embedq.jobs.service import JobService
from embedq.service import EmbeddingService
from tests import support
from tests.integration.test_api_support import ApiServer

pytestmark = pytest.mark.integration

EXAMPLES = int(os.environ.get("EMBEDQ_TEST_STORED_VALUES_EXAMPLES", "60"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, derandomize=False,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

# Text as a client can send it in JSON: any code point, lone surrogates and NUL included.
ANY_CHAR = st.characters(blacklist_categories=(), max_codepoint=0x10FFFF)
HOSTILE_TEXT = st.one_of(st.text(ANY_CHAR, min_size=0, max_size=12), st.sampled_from(
    ["\x00", "a\ud800", "\udfff", "\U0001f600", " ", "x" * 300]))
PLAIN = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12)
OFFSETS = st.integers(-(24 * 60 - 1), 24 * 60 - 1).map(
    lambda m: timezone(timedelta(minutes=m)))
ZONED = st.one_of(st.none(), OFFSETS)
MOMENT = st.one_of(
    st.datetimes(timezones=ZONED).map(lambda d: d.isoformat()),
    # the calendar's ends, where an offset moves a moment out of what drivers load
    st.datetimes(max_value=datetime(1, 1, 3), timezones=ZONED).map(lambda d: d.isoformat()),
    st.datetimes(min_value=datetime(9999, 12, 29), timezones=ZONED).map(
        lambda d: d.isoformat()),
    st.sampled_from(["0001-01-01T00:00:00+14:00", "0001-01-01T00:00:00", "1969-12-31T23:59Z",
                     "9999-12-31T23:59:59-14:00", "2030-01-01T00:00:00Z", "+002030-01-01"]))
NUMBER = st.one_of(st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
                   st.sampled_from([0, 1, -1, 2**31, -(2**31) - 1, 2**63]))
JSON_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), NUMBER, HOSTILE_TEXT, PLAIN),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.one_of(PLAIN, HOSTILE_TEXT), inner, max_size=3)),
    max_leaves=8)
ANY = st.one_of(HOSTILE_TEXT, NUMBER, st.none(), st.booleans(), MOMENT)


@st.composite
def one_hostile(draw: st.DrawFn, plain: dict[str, st.SearchStrategy[Any]],
                hostile: dict[str, st.SearchStrategy[Any]]) -> dict[str, Any]:
    """A request whose fields are plain values but one or two, drawn from `hostile` (or
    anything at all): a bad value is tried beside values that let the request through."""
    body = {name: draw(strategy) for name, strategy in plain.items()}
    for name in draw(st.lists(st.sampled_from(sorted(hostile)), min_size=1, max_size=2)):
        body[name] = draw(st.one_of(hostile[name], hostile[name], hostile[name], ANY))
    return {k: v for k, v in body.items() if v is not None}


JOB_PLAIN: dict[str, st.SearchStrategy[Any]] = {
    "input": st.lists(PLAIN, min_size=1, max_size=3), "priority": st.just("bulk"),
    "not_before": st.none(), "window": st.none(), "timezone": st.none(),
    "callback_url": st.none()}
JOB_HOSTILE: dict[str, st.SearchStrategy[Any]] = {
    "input": st.lists(st.one_of(HOSTILE_TEXT, st.fixed_dictionaries(
        {"id": HOSTILE_TEXT, "text": PLAIN}), st.fixed_dictionaries(
        {"id": PLAIN, "text": HOSTILE_TEXT})), min_size=1, max_size=3),
    "priority": HOSTILE_TEXT, "not_before": MOMENT,
    "window": st.sampled_from(["01:00-06:00", "23:00-01:00", "24:00-01:00"]),
    "timezone": st.sampled_from(["UTC", "Pacific/Kiritimati", "Etc/GMT+12", "UTC\x00"]),
    "callback_url": st.one_of(HOSTILE_TEXT, PLAIN).map(lambda t: f"http://hooks.example/{t}"),
}
CACHE_PLAIN: dict[str, st.SearchStrategy[Any]] = {
    "query": PLAIN, "payload": PLAIN, "metadata": st.none(), "ttl_s": st.none(),
    "sliding": st.none()}
CACHE_HOSTILE: dict[str, st.SearchStrategy[Any]] = {
    "query": HOSTILE_TEXT, "payload": JSON_VALUE, "metadata": JSON_VALUE, "ttl_s": NUMBER,
    "sliding": st.booleans()}
CONFIG = st.fixed_dictionaries({"threshold": st.one_of(st.none(), NUMBER),
                                "max_false_hit_rate": st.one_of(st.none(), NUMBER)})
LINE_PLAIN: dict[str, st.SearchStrategy[Any]] = {
    "custom_id": PLAIN, "input": st.lists(PLAIN, min_size=1, max_size=3),
    "dimensions": st.none(), "filename": PLAIN, "metadata": st.none()}
LINE_HOSTILE: dict[str, st.SearchStrategy[Any]] = {
    "custom_id": HOSTILE_TEXT, "input": st.lists(HOSTILE_TEXT, min_size=1, max_size=3),
    "dimensions": NUMBER, "filename": HOSTILE_TEXT,
    "metadata": st.dictionaries(st.one_of(PLAIN, HOSTILE_TEXT),
                                st.one_of(PLAIN, HOSTILE_TEXT), max_size=3)}


@pytest.fixture(scope="module")
def api(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    support.check_postgres()
    tmp = tmp_path_factory.mktemp("stored")
    with support.temporary_database() as pg_url:
        # Online misses encoded by the API itself (the cache's puts embed their query);
        # jobs go to queues nobody consumes: what is read back is what was stored.
        env = support.cluster_env(redis_url, pg_url, online_queue="online-stored",
                                  bulk_queue="bulk-stored", online_encode="local",
                                  semantic_index="exact", callback_secret="s3cret",
                                  callback_allow="*", data_dir=tmp / "data")
        with ApiServer(env, tmp / "serve.log") as server:
            yield server


@pytest.fixture(scope="module")
def jobs(api: ApiServer) -> JobService:
    return JobService(EmbeddingService(support.settings_from(api.env)))


@pytest.fixture(scope="module")
def http(api: ApiServer) -> Iterator[httpx.Client]:
    """One client for the module's thousands of requests: a bare `httpx.get` builds an
    SSL context each time (about 25 ms), which was most of what an example cost."""
    with httpx.Client(base_url=api.url, timeout=60) as client:
        yield client


def send(http: httpx.Client, method: str, path: str, body: Any) -> httpx.Response:
    raw = json.dumps(body, ensure_ascii=True, allow_nan=True)  # \ud800 and NaN, as sent
    got = http.request(method, path, content=raw.encode("ascii"),
                       headers={"Content-Type": "application/json"})
    assert got.status_code < 500, (path, body, got.text)
    return got


def read(http: httpx.Client, path: str) -> Any:
    got = http.get(path)
    assert got.status_code == 200, (path, got.text)
    media = got.headers.get("content-type", "").split(";")[0]
    return got.json() if media == "application/json" else got.text


@PROPERTY
@given(body=one_hostile(JOB_PLAIN, JOB_HOSTILE))
@example(body={"input": ["a"], "not_before": "0001-01-01T00:00:00+14:00"})
@example(body={"input": ["a"], "not_before": "9999-12-31T23:00:00-05:00"})
@example(body={"input": ["a"], "callback_url": "http://hooks.example/\x00"})
def test_every_job_stored_reads_back_through_every_reader(
        http: httpx.Client, jobs: JobService, tmp_path: Path, body: dict[str, Any]) -> None:
    got = send(http, "POST", "/v1/jobs", body)
    if got.status_code != 202:
        assert got.json()["error"]["param"], got.text  # a 4xx names what to change
        return
    job_id = got.json()["id"]
    total = len(body["input"])
    assert read(http, f"/v1/jobs/{job_id}")["id"] == job_id
    assert read(http, f"/v1/jobs/{job_id}/results")["total"] == total
    assert job_id in {j["id"] for j in read(http, "/v1/jobs?limit=100")["data"]}
    assert job_id in {j["id"] for j in jobs.list(1000)}
    jobs.tick()
    state = jobs.describe(job_id)
    assert "cannot be scheduled" not in (state["error"] or ""), state
    for suffix in (".jsonl", ".parquet", ".npy"):
        assert export(jobs.store, job_id, tmp_path / f"out{suffix}") == total
    assert send(http, "DELETE", f"/v1/jobs/{job_id}", None).status_code == 200


@PROPERTY
@given(body=one_hostile(CACHE_PLAIN, CACHE_HOSTILE), config=CONFIG)
def test_every_cache_entry_and_config_stored_reads_back(
        http: httpx.Client, body: dict[str, Any], config: dict[str, Any]) -> None:
    ns = "stored-values"
    put = send(http, "PUT", f"/v1/semantic-cache/{ns}", body)
    if put.status_code == 200:
        found = send(http, "POST", f"/v1/semantic-cache/{ns}/lookup",
                     {"query": body["query"], "threshold": 1.0, "k": 5})
        assert found.status_code == 200 and found.json()["hit"], found.text
        assert any(m["payload"] == body["payload"] for m in found.json()["matches"])
    configured = send(http, "PUT", f"/v1/semantic-cache/{ns}/config", config)
    assert configured.status_code in (200, 404, 422), configured.text
    read(http, f"/v1/semantic-cache/{ns}/stats")


@PROPERTY
@given(line=one_hostile(LINE_PLAIN, LINE_HOSTILE))
@example(line={"custom_id": "a", "input": ["a\ud800"]})
@example(line={"custom_id": "a\x00", "input": ["a"]})
@example(line={"custom_id": "\udfff", "input": ["a"]})
@example(line={"custom_id": "a", "input": ["a"], "metadata": {"k": "\ud800"}})
@example(line={"custom_id": "a", "input": ["a"], "filename": "a\x00b.jsonl"})
@example(line={"custom_id": "a", "input": ["a"], "dimensions": 385})
def test_every_file_and_batch_stored_reads_back(http: httpx.Client, line: dict[str, Any]
                                               ) -> None:
    custom_ids, texts = [line.get("custom_id"), "second"], line.get("input")
    filename, metadata = str(line.get("filename", "f.jsonl")), line.get("metadata")
    request = {"input": texts, "dimensions": line.get("dimensions")}
    lines = [json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/embeddings",
                         "body": {k: v for k, v in request.items() if v is not None}},
                        ensure_ascii=True, allow_nan=True) for cid in custom_ids]
    got = http.post("/v1/files", content=multipart(
        filename.encode("utf-8", "surrogatepass"), "\n".join(lines).encode()),
        headers={"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"})
    assert got.status_code < 500, got.text
    if got.status_code != 200:
        return
    file_id = got.json()["id"]
    assert read(http, f"/v1/files/{file_id}")["id"] == file_id
    assert file_id in {f["id"] for f in read(http, "/v1/files?limit=100")["data"]}
    assert read(http, f"/v1/files/{file_id}/content")
    before = {b["id"] for b in read(http, "/v1/batches?limit=100")["data"]}
    batch = send(http, "POST", "/v1/batches", {"input_file_id": file_id,
                                              "metadata": metadata})
    # The file was checked whole at upload: nothing in it can refuse its batch now.
    assert batch.status_code == 200 or batch.json()["error"]["param"] == "metadata", batch.text
    if batch.status_code == 200:
        batch_id = batch.json()["id"]
        assert read(http, f"/v1/batches/{batch_id}")["metadata"] == metadata
        assert batch_id in {b["id"] for b in read(http, "/v1/batches?limit=100")["data"]}
        assert send(http, "POST", f"/v1/batches/{batch_id}/cancel", None).status_code == 200
    else:  # refused: no batch row is left behind
        assert {b["id"] for b in read(http, "/v1/batches?limit=100")["data"]} == before


BOUNDARY = "embedq-stored-values"


def multipart(filename: bytes, content: bytes) -> bytes:
    """An upload framed by hand: the filename's bytes reach the server as sent (a client
    library would escape or refuse a NUL or a lone surrogate in it)."""
    mark = f"--{BOUNDARY}\r\n".encode()
    return (mark + b'Content-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
            + mark + b'Content-Disposition: form-data; name="file"; filename="'
            + filename.replace(b'"', b"'").replace(b"\r", b"").replace(b"\n", b"")
            + b'"\r\n\r\n' + content + f"\r\n--{BOUNDARY}--\r\n".encode())


def test_a_row_no_driver_can_load_is_skipped_by_the_tick_the_list_and_cancel(
        api: ApiServer, http: httpx.Client, jobs: JobService, caplog: pytest.LogCaptureFixture,
        salt: str) -> None:
    """Written straight into Postgres as an older release stored such values: 1 BC."""
    from sqlalchemy import text

    bad = f"bc{salt}"
    spec = jobs.service.spec(None)
    with jobs.service.db.session() as s:
        s.execute(text(
            "INSERT INTO jobs (id, tenant, status, priority, model, revision, normalize, "
            "not_before, total, chunks, loaded, generation, callback_attempts) VALUES "
            "(:id, 'default', 'queued', 'bulk', :model, :rev, true, "
            "'0001-01-01 00:00:00+00 BC', 0, 0, true, 0, 0)"),
            {"id": bad, "model": spec.model, "rev": spec.revision})
    due = jobs.submit([f"{salt} due after the bad row"], start=False)
    # The command itself, over every row this module stored (the properties' too).
    listed_by_cli = subprocess.run(
        [sys.executable, "-m", "embedq.cli", "jobs", "list", "--json", "--limit", "100000"],
        env=api.env, cwd=support.ROOT, capture_output=True, text=True, timeout=120)
    assert listed_by_cli.returncode == 0, listed_by_cli.stderr
    assert due in {j["id"] for j in json.loads(listed_by_cli.stdout)}
    assert bad in listed_by_cli.stderr  # named in the warning, left out of the list
    with caplog.at_level(logging.WARNING):
        listed = {j["id"] for j in jobs.list(1000)}
        assert due in listed and bad not in listed
        assert bad in caplog.text and "left out of the list" in caplog.text
        assert due in {j["id"] for j in read(http, "/v1/jobs?limit=100")["data"]}
        counts = jobs.tick()
    assert counts["started"] >= 1 and counts["failed"] >= 1, counts
    assert jobs.describe(due)["status"] == "running"
    assert f"job {bad} cannot be scheduled" in caplog.text
    assert jobs.tick()["failed"] == 0  # marked failed once: no longer looked after
    assert not jobs.cancel(bad)  # found (by its owner alone), already final
    assert send(http, "DELETE", f"/v1/jobs/{due}", None).status_code == 200
