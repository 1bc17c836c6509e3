"""Jobs on real Redis, Postgres and `embedq worker` processes: bulk files, the HTTP API,
windows under a fake clock, cancellation, export round-trips."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from embedq.corpus import iter_corpus
from embedq.deployment import Deployment
from embedq.jobs.items import ItemRow
from embedq.jobs.service import JobService
from embedq.models import JobStatus
from embedq.service import EmbeddingService
from tests import support
from tests.conftest import Cluster

pytestmark = pytest.mark.integration


class JobCluster:
    """A worker on queues of its own (so no other test's worker takes these tasks)."""

    def __init__(self, env: dict[str, str], worker: support.WorkerProcess, ledger: Path,
                 tmp: Path) -> None:
        self.env = env
        self.worker = worker
        self.ledger = ledger
        self.tmp = tmp

    def jobs(self, clock: Any = None) -> JobService:
        service = EmbeddingService(support.settings_from(self.env))
        return JobService(service, clock) if clock else JobService(service)

    def passes(self) -> dict[str, int]:
        return support.ledger_counts(self.ledger)

    def cli(self, *args: str, timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "embedq.cli", *args], env=self.env, cwd=support.ROOT,
            capture_output=True, text=True, timeout=timeout_s,
        )


def job_env(redis_url: str, pg_url: str, tmp: Path, tag: str, **extra: Any) -> dict[str, str]:
    return support.cluster_env(
        redis_url, pg_url, ledger_path=tmp / "ledger.txt", online_queue=f"online-{tag}",
        bulk_queue=f"bulk-{tag}", job_chunk_max_texts=300, job_wave_chunks=2,
        **extra,
    )


@pytest.fixture(scope="module")
def jc(redis_url: str, pg_url: str, tmp_path_factory: pytest.TempPathFactory
       ) -> Iterator[JobCluster]:
    tmp = tmp_path_factory.mktemp("jobs")
    env = job_env(redis_url, pg_url, tmp, "jobs")
    worker = support.WorkerProcess(env, tmp / "worker.log").start()
    try:
        yield JobCluster(env, worker, tmp / "ledger.txt", tmp)
    finally:
        worker.stop()


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def wait_for(jobs: JobService, job_id: str, timeout_s: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = jobs.describe(job_id)
        if state["status"] in JobStatus.final():
            return state
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not end: {jobs.describe(job_id)}")


def corpus_file(path: Path, salt: str, n: int) -> list[tuple[str, str]]:
    rows = [(pid, f"{salt} {text}") for pid, text in iter_corpus(limit=n)]
    assert len(rows) == n, f"the bundled corpus has {len(rows)} lines, not {n}"
    with path.open("w") as fh:
        for pid, text in rows:
            fh.write(json.dumps({"id": pid, "text": text}) + "\n")
    return rows


def test_debian_job_encodes_each_distinct_text_once_and_exports_in_order(
    jc: JobCluster, salt: str
) -> None:
    import pyarrow.parquet as pq

    src = jc.tmp / f"debian-{salt}.jsonl"
    rows = corpus_file(src, salt, 3000)
    texts = [t for _, t in rows]
    distinct = set(texts)
    assert len(distinct) < len(texts)  # the slice has duplicates to collapse
    out = jc.tmp / f"out-{salt}.parquet"
    done = jc.cli("bulk", str(src), "--now", "--wait", "--json", "--out", str(out))
    assert done.returncode == 0, done.stderr
    state = json.loads(done.stdout)
    p = state["progress"]
    assert state["status"] == "succeeded"
    assert (p["total"], p["done"], p["failed"]) == (3000, 3000, 0)
    assert p["encoded"] == len(distinct)
    assert p["coalesced"] + p["cached"] == 3000 - len(distinct)
    passes = jc.passes()
    assert [passes.get(digest(t), 0) for t in sorted(distinct)] == [1] * len(distinct)

    table = pq.read_table(out)
    assert table.column("id").to_pylist() == [pid for pid, _ in rows]
    exported = np.array(table.column("embedding").to_pylist(), dtype=np.float32)
    sample = list(range(0, 3000, 7))
    jobs = jc.jobs()
    expected = jobs.service.embed([texts[i] for i in sample]).vectors()
    np.testing.assert_array_equal(exported[sample], np.stack(expected))

    npy = jc.tmp / f"out-{salt}.npy"
    assert jc.cli("jobs", "export", state["id"], "--out", str(npy)).returncode == 0
    np.testing.assert_array_equal(np.load(npy), exported)
    ids = [json.loads(line)["id"] for line in npy.with_suffix(".ids.jsonl").open()]
    assert ids == [pid for pid, _ in rows]
    jl = jc.tmp / f"out-{salt}.jsonl"
    assert jc.cli("jobs", "export", state["id"], "--out", str(jl)).returncode == 0
    lines = [json.loads(line) for line in jl.open()]
    assert [r["index"] for r in lines] == list(range(3000))
    np.testing.assert_array_equal(np.array(lines[11]["embedding"], np.float32), exported[11])


def test_second_job_over_the_same_texts_is_all_cached(jc: JobCluster, salt: str) -> None:
    jobs = jc.jobs()
    texts = [f"{salt} again {i % 40}" for i in range(200)]
    first = wait_for(jobs, jobs.submit(texts))
    second = wait_for(jobs, jobs.submit(texts))
    assert first["progress"]["encoded"] == 40
    again = second["progress"]
    # Its two chunks (cut for the two slots of one worker) run at once over the same 40
    # texts: the one that claims a text first finds it stored (cached, each of its
    # items), the other joins that lookup (coalesced). Nothing is computed again.
    assert again["encoded"] == 0 and again["cached"] + again["coalesced"] == 200, again
    assert again["cached"] >= 100 and again["chunks"] == 2, again
    assert all(n == 1 for n in (jc.passes()[digest(t)] for t in set(texts)))


def test_items_loaded_by_copy_keep_every_character_and_id(jc: JobCluster, salt: str) -> None:
    """Items go into Postgres by binary COPY: what COPY's text format would escape (tab,
    newline, backslash, a literal \\N) and ids present or absent come back as sent, each
    item with its own text's vector."""
    from embedq.jobs.readers import Record

    odd = ["tab\there", "two\nlines", "back\\slash", "\\N", "'quoted' \"twice\"",
           "emoji \U0001f600 and \u00e9", "trailing space ", "\r\n windows"]
    records = [Record(i + 1, None if i % 2 else f"id\t{i}", f"{salt} {t}")
               for i, t in enumerate(odd)]
    jobs = jc.jobs()
    state = wait_for(jobs, jobs.submit(records))
    assert state["status"] == "succeeded", state
    rows = list(jobs.results(state["id"], 0, len(records)))
    assert [r.id for r in rows] == [r.id for r in records]
    expected = jobs.service.embed([r.text for r in records]).vectors()
    got = [np.frombuffer(r.vector or b"", dtype="<f4") for r in rows]
    np.testing.assert_array_equal(np.stack(got), np.stack(expected))


def test_bad_line_names_it_and_keeps_the_lines_before(jc: JobCluster, salt: str) -> None:
    src = jc.tmp / f"bad-{salt}.jsonl"
    good = [f"{salt} good {i}" for i in range(5)]
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in good)
                   + '{"title": "no text field"}\n' + json.dumps({"text": "after"}) + "\n")
    run = jc.cli("bulk", str(src), "--now")
    assert run.returncode == 2
    assert "line 6" in run.stderr and "--from-line 6" in run.stderr
    job_id = run.stderr.split("saved in job ")[1].split(",")[0]
    jobs = jc.jobs()
    state = wait_for(jobs, job_id)
    assert state["status"] == "succeeded" and state["progress"]["done"] == 5
    assert "line 6" in state["error"]
    got = [r.vector for r in jobs.results(job_id, 0, 10)]
    want = jobs.service.embed(good).vectors()
    for blob, vec in zip(got, want, strict=True):
        assert blob is not None
        np.testing.assert_array_equal(np.frombuffer(blob, "<f4"), vec)


def test_a_bad_line_and_failed_texts_are_both_said(jc: JobCluster, salt: str) -> None:
    """What loading said (the bad line) stays first; the texts' failures follow it."""
    src = jc.tmp / f"bad-and-broken-{salt}.jsonl"
    src.write_text(json.dumps({"text": f"{salt} fine"}) + "\n"
                   + json.dumps({"text": f"{salt} broken [[nan]]"}) + "\n" + "{not json\n")
    run = jc.cli("bulk", str(src), "--now")
    assert run.returncode == 2 and "line 3" in run.stderr, run.stderr
    job_id = run.stderr.split("saved in job ")[1].split(",")[0]
    state = wait_for(jc.jobs(), job_id)
    assert state["status"] == "succeeded_with_errors"
    loaded, _, failed = state["error"].partition("; 1 of 2 texts failed; 1 with: ")
    assert "line 3" in loaded and failed.startswith("InvalidVector"), state["error"]


def test_non_utf8_and_empty_files_are_refused_clearly(jc: JobCluster, salt: str) -> None:
    raw = jc.tmp / f"latin-{salt}.txt"
    raw.write_bytes(f"{salt} ok\n".encode() + b"caf\xe9\n")
    run = jc.cli("bulk", str(raw), "--now")
    assert run.returncode == 2 and "line 2" in run.stderr and "UTF-8" in run.stderr
    empty = jc.tmp / f"empty-{salt}.jsonl"
    empty.write_text("")
    run = jc.cli("bulk", str(empty), "--now")
    assert run.returncode == 2 and "holds no texts" in run.stderr


class FakeClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def callbacks_run(jc: JobCluster) -> int:
    """Wave callbacks (`close_job`) the worker has finished: Celery logs each result."""
    log = (jc.tmp / "worker.log").read_text(errors="replace")
    return len(re.findall(r"Task embedq\.close_job\[[^\]]+\] succeeded", log))


def dispatched_chunks(jobs: JobService, job_id: str) -> int:
    """Chunks sent to the broker so far: one wave of `job_wave_chunks` per generation."""
    job = jobs.store.get(job_id)
    return min(job.chunks, job.generation * jobs.service.settings.jobs.wave_chunks)


def settle(jc: JobCluster, jobs: JobService, job_id: str, callbacks_before: int) -> int:
    """Wait until each wave sent so far has closed (a chord's callback runs once all its
    chunk tasks have ended); return the job's generation, which a callback that sent
    another wave would have bumped."""
    generation = jobs.store.get(job_id).generation
    support.wait_until(lambda: callbacks_run(jc) - callbacks_before >= generation, 120,
                       f"the callbacks of {generation} wave(s)", interval_s=0.1)
    return generation


def test_window_waits_pauses_and_resumes_under_a_fake_clock(jc: JobCluster, salt: str
                                                           ) -> None:
    real = datetime.now(UTC).replace(second=0, microsecond=0)
    # A window around the real time, so the worker's own (real) clock agrees with "open".
    window = f"{real - timedelta(hours=1):%H:%M}-{real + timedelta(hours=1):%H:%M}"
    clock = FakeClock(real - timedelta(hours=2))
    jobs = jc.jobs(clock)
    callbacks_before = callbacks_run(jc)
    texts = [f"{salt} slow {i} [[sleep:0.15]]" for i in range(1500)]
    job_id = jobs.submit(texts, window=window, priority="bulk")
    state = jobs.describe(job_id)
    assert state["status"] == "queued" and state["waiting_until"] is not None
    assert jobs.tick()["started"] == 0
    # Nothing was sent to the broker, so nothing can run while the window is shut.
    assert dispatched_chunks(jobs, job_id) == 0

    clock.now = real
    assert jobs.tick()["started"] == 1
    passes = {digest(t) for t in texts}
    support.wait_until(lambda: not passes.isdisjoint(jc.passes()), 60,
                       "the first wave encoding")
    clock.now = real + timedelta(hours=2)  # the window closes mid-job
    assert jobs.tick()["paused"] == 1
    generation = settle(jc, jobs, job_id, callbacks_before)
    paused = jobs.describe(job_id)
    assert paused["status"] == "queued" and paused["progress"]["done"] < 1500
    # The running wave finished and its callback saw the pause: no new wave was sent.
    assert jobs.store.get(job_id).generation == generation
    assert paused["progress"]["chunks_done"] <= dispatched_chunks(jobs, job_id)

    clock.now = real + timedelta(days=1)  # the next opening
    assert jobs.tick()["started"] == 1
    final = wait_for(jobs, job_id)
    assert final["status"] == "succeeded" and final["progress"]["done"] == 1500


def test_cancel_stops_what_has_not_run(jc: JobCluster, salt: str) -> None:
    jobs = jc.jobs()
    settings = jobs.service.settings
    callbacks_before = callbacks_run(jc)
    texts = [f"{salt} cancel {i} [[sleep:0.2]]" for i in range(1500)]
    job_id = jobs.submit(texts)
    passes = {digest(t) for t in texts}
    support.wait_until(lambda: not passes.isdisjoint(jc.passes()), 60,
                       "the first wave encoding")
    assert jobs.cancel(job_id)
    generation = settle(jc, jobs, job_id, callbacks_before)
    state = jobs.describe(job_id)
    assert state["status"] == "cancelled"
    # Only the waves sent before the cancel ran; their callbacks sent nothing more.
    assert jobs.store.get(job_id).generation == generation
    assert state["progress"]["chunks_done"] <= dispatched_chunks(jobs, job_id)
    assert dispatched_chunks(jobs, job_id) < state["progress"]["chunks"]
    assert state["progress"]["done"] <= (
        generation * settings.jobs.wave_chunks * settings.jobs.chunk_max_texts)
    assert not jobs.cancel(job_id)


@contextlib.contextmanager
def jobs_server(settings: Any) -> Iterator[str]:
    """The jobs router behind the API's error table, served in this process on a free port."""
    import uvicorn
    from fastapi import FastAPI

    from embedq.api.auth import AuthMiddleware
    from embedq.api.errors import install_handlers
    from embedq.api.routes.jobs import router
    from embedq.tenants import Authenticator, KeyStore

    app = FastAPI()
    app.state.settings = settings
    deployment = Deployment(settings)
    app.state.deployment = deployment
    install_handlers(app)
    # The routes act for the caller the key check names: with no key configured and none
    # stored, the check lets every caller in as the default tenant.
    authenticator = Authenticator(settings.api.keys, KeyStore(deployment.service.db))
    app.add_middleware(AuthMiddleware, authenticator=lambda: authenticator)
    app.include_router(router)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def api(jc: JobCluster) -> Iterator[str]:
    with jobs_server(support.settings_from(jc.env)) as url:
        yield url


def test_http_jobs_submit_poll_results(api: str, jc: JobCluster, salt: str) -> None:
    inputs = [f"{salt} http {i}" for i in range(30)] + [{"id": "last", "text": f"{salt} x"}]
    r = httpx.post(f"{api}/v1/jobs", json={"input": inputs, "priority": "bulk"})
    assert r.status_code == 202, r.text
    body = r.json()
    assert set(body) >= {"id", "status", "status_url"}
    deadline = time.monotonic() + 60
    while (state := httpx.get(body["status_url"]).json())["status"] != "succeeded":
        assert time.monotonic() < deadline, state
        time.sleep(0.2)
    assert state["progress"]["total"] == 31 and state["created_at"] and state["finished_at"]
    page = httpx.get(f"{api}/v1/jobs/{body['id']}/results",
                     params={"offset": 25, "limit": 10}).json()
    assert [d["index"] for d in page["data"]] == list(range(25, 31))
    assert page["data"][-1]["id"] == "last" and page["has_more"] is False
    want = jc.jobs().service.embed([f"{salt} http 25"]).vectors()[0]
    np.testing.assert_array_equal(np.array(page["data"][0]["embedding"], np.float32), want)
    assert httpx.get(f"{api}/v1/jobs/nope").status_code == 404
    bad = httpx.post(f"{api}/v1/jobs", json={"input": ["ok", ""]})
    assert bad.status_code == 422 and "input 1" in bad.json()["error"]["message"]
    gone = httpx.delete(f"{api}/v1/jobs/{body['id']}").json()
    assert gone["cancelled"] is False and gone["status"] == "succeeded"


def test_http_jobs_answer_503_with_retry_after_when_the_database_is_down(jc: JobCluster
                                                                         ) -> None:
    settings = support.settings_from(jc.env).with_overrides(
        database_url="postgresql://postgres@127.0.0.1:1/embedq_down")
    with jobs_server(settings) as url:
        r = httpx.post(f"{url}/v1/jobs", json={"input": ["a"]}, timeout=30)
        assert r.status_code == 503 and int(r.headers["Retry-After"]) > 0
        assert "retry" in r.json()["error"]["message"]


def test_nul_characters_are_a_clear_error(cluster: Cluster, salt: str) -> None:
    from embedq.errors import BadInputFile

    jobs = JobService(cluster.service())
    with pytest.raises(BadInputFile, match="NUL"):
        jobs.submit([f"{salt} fine", f"{salt} bad \x00 text"], priority="online", start=False)


def test_a_job_with_failed_items_ends_succeeded_with_errors(api: str, jc: JobCluster,
                                                            salt: str) -> None:
    """A NaN vector fails its item for good: the job says so, with how many, and its
    results and export keep the items that did succeed."""
    texts = [f"{salt} fine {i}" for i in range(9)]
    texts.insert(4, f"{salt} broken [[nan]]")
    jobs = jc.jobs()
    state = wait_for(jobs, jobs.submit(texts))
    assert state["status"] == "succeeded_with_errors"
    assert (state["progress"]["failed"], state["progress"]["done"]) == (1, 9)
    http = httpx.get(f"{api}/v1/jobs/{state['id']}").json()
    assert http["status"] == "succeeded_with_errors" and http["progress"]["failed"] == 1
    rows = list(jobs.results(state["id"], 0, 10))
    assert [r.vector is None for r in rows] == [i == 4 for i in range(10)]
    assert rows[4].error
    # the job itself says how many failed and why, where status and the API show it
    assert state["error"] == f"1 of 10 texts failed; 1 with: {rows[4].error}"
    assert http["error"] == state["error"]
    out = jc.tmp / f"errors-{salt}.jsonl"
    assert jc.cli("jobs", "export", state["id"], "--out", str(out)).returncode == 0
    lines = [json.loads(line) for line in out.open()]
    assert ["embedding" in r for r in lines] == [i != 4 for i in range(10)]
    assert lines[4]["error"] == rows[4].error


def test_a_job_whose_every_item_failed_ends_failed_and_says_why(jc: JobCluster, salt: str
                                                                 ) -> None:
    """The job's error names the cause (before, `error` stayed None and the reason was
    only in the worker's log), and `embedq bulk --wait` prints it."""
    jobs = jc.jobs()
    state = wait_for(jobs, jobs.submit([f"{salt} all broken {i} [[nan]]" for i in range(3)]))
    assert state["status"] == "failed" and state["progress"]["failed"] == 3
    message = next(iter(jobs.results(state["id"], 0, 1))).error
    assert message and state["error"] == f"3 of 3 texts failed; 3 with: {message}"
    src = jc.tmp / f"broken-{salt}.jsonl"
    src.write_text("".join(json.dumps({"text": f"{salt} cli broken {i} [[nan]]"}) + "\n"
                           for i in range(2)))
    run = jc.cli("bulk", str(src), "--now", "--wait")
    assert run.returncode == 1, run.stderr
    assert f"failed: 2 of 2 texts failed; 2 with: {message}" in run.stderr
    assert "warning" not in run.stderr  # the live worker serves the job's revision


def test_a_job_for_a_revision_no_live_worker_serves_is_warned_at_submission(
        jc: JobCluster, salt: str) -> None:
    """The worker serves the cluster's revision; a shell with another one submits: it is
    told before the texts run, and the job's error then says the worker's own words."""
    src = jc.tmp / f"other-revision-{salt}.jsonl"
    src.write_text(json.dumps({"text": f"{salt} other revision"}) + "\n")
    run = subprocess.run(
        [sys.executable, "-m", "embedq.cli", "bulk", str(src), "--now", "--wait"],
        env={**jc.env, "EMBEDQ_MODEL_REVISION": f"other-{salt}"}, cwd=support.ROOT,
        capture_output=True, text=True, timeout=180)
    assert run.returncode == 1, run.stderr
    warning = next(line for line in run.stderr.splitlines() if "warning" in line)
    assert f"not {support.settings_from(jc.env).model.model}@other-{salt}" in warning
    assert "would fail this job's texts" in warning and "EMBEDQ_MODEL_REVISION" in warning
    assert "1 of 1 texts failed; 1 with: EmbeddingFailed: this worker serves" in run.stderr


def test_a_start_time_too_far_ahead_is_refused_before_anything_is_stored(
    api: str, jc: JobCluster, salt: str
) -> None:
    from embedq.errors import InvalidInput

    jobs = jc.jobs()
    before = set(jobs.store.recent(10_000))
    r = httpx.post(f"{api}/v1/jobs", json={
        "input": [f"{salt} far"], "window": "01:00-02:00", "timezone": "Pacific/Kiritimati",
        "not_before": "9999-12-31T23:00:00+00:00"})
    assert r.status_code == 422, r.text
    assert "366 days ahead" in r.json()["error"]["message"]
    with pytest.raises(InvalidInput, match="366 days ahead"):
        jobs.submit([f"{salt} far"], not_before=datetime(9999, 12, 31, tzinfo=UTC))
    assert set(jobs.store.recent(10_000)) == before


def test_one_poisoned_job_row_does_not_stop_the_tick_or_the_listing(jc: JobCluster,
                                                                     salt: str) -> None:
    from embedq.models import Job

    jobs = jc.jobs()
    spec = jobs.service.spec(None)

    def row(**schedule: Any) -> str:
        """A job row written around the API's checks, as an old release or a bug might."""
        job_id = f"poison{salt}{len(schedule)}"
        jobs.store.create(Job(
            id=job_id, status="queued", priority="bulk", model=spec.model,
            revision=spec.revision, dimensions=spec.dimensions, normalize=spec.normalize,
            total=0, chunks=0, loaded=True, generation=0, **schedule))
        return job_id

    far = row(window="01:00-02:00", timezone="Pacific/Kiritimati",
              not_before=datetime(9999, 12, 31, 23, 0, tzinfo=UTC))
    unknown_zone = row(window="01:00-02:00", timezone="Mars/Olympus_Mons", not_before=None,
                       source="test")
    try:
        listed = jc.cli("jobs", "list", "--json", "--limit", "1000")
        assert listed.returncode == 0, listed.stderr
        assert {far, unknown_zone} <= {j["id"] for j in json.loads(listed.stdout)}
        due = jobs.submit([f"{salt} due {i}" for i in range(5)], start=False)
        counts = jobs.tick()
        assert counts["started"] >= 1 and counts["failed"] >= 1
        assert wait_for(jobs, due)["status"] == "succeeded"
        broken = jobs.describe(unknown_zone)
        assert broken["status"] == "failed" and "Mars/Olympus_Mons" in broken["error"]
        waiting = jobs.describe(far)
        assert waiting["status"] == "queued" and waiting["waiting_until"].startswith("9999")

        listed = jc.cli("jobs", "list", "--json", "--limit", "1000")
        assert listed.returncode == 0, listed.stderr
        assert {far, unknown_zone, due} <= {j["id"] for j in json.loads(listed.stdout)}
        assert jobs.tick()["failed"] == 0  # the failed row is no longer looked after
    finally:
        with jobs.service.db.session() as s:
            for job_id in (far, unknown_zone):
                s.delete(s.get(Job, job_id))


def test_a_job_whose_submission_died_mid_load_is_failed_and_frees_its_tenants_queue(
        jc: JobCluster, salt: str) -> None:
    """An API killed mid-submit leaves a queued job that never finished loading: beat
    fails it once its inputs stopped arriving EMBEDQ_JOB_LOAD_TIMEOUT_S ago, so it no
    longer counts against the tenant's queued inputs; one still loading is left alone."""
    from sqlalchemy import update

    from embedq.jobs.store import utcnow
    from embedq.models import Job

    jobs = jc.jobs()
    spec = jobs.service.spec(None)
    tenant = f"t{salt}"

    def loading(job_id: str, inputs: int, idle_s: float) -> None:
        jobs.store.create(Job(
            id=job_id, tenant=tenant, status="queued", priority="bulk", model=spec.model,
            revision=spec.revision, dimensions=spec.dimensions, normalize=spec.normalize,
            total=0, chunks=0, loaded=False, generation=0))
        jobs.store.add(job_id, [ItemRow(job_id, i, None, f"{salt} {i}", "0" * 64)
                                for i in range(inputs)], [])
        with jobs.service.db.session() as s:
            s.execute(update(Job).where(Job.id == job_id).values(
                progress_at=utcnow() - timedelta(seconds=idle_s)))

    timeout_s = jobs.settings.jobs.load_timeout_s
    loading(f"dead{salt}", 7, timeout_s + 5)
    loading(f"slow{salt}", 3, timeout_s / 2)
    assert jobs.store.queued_inputs(tenant) == 10
    assert jobs.tick()["abandoned"] >= 1
    dead = jobs.describe(f"dead{salt}")
    assert dead["status"] == "failed" and "submission stopped" in dead["error"], dead
    assert jobs.describe(f"slow{salt}")["status"] == "queued"
    assert jobs.store.queued_inputs(tenant) == 3
    jobs.cancel(f"slow{salt}")


def test_a_wave_whose_callback_was_lost_is_closed_by_the_tick(jc: JobCluster,
                                                              salt: str) -> None:
    """The chord's callback of a wave can be lost (Redis refusing writes as its last chunk
    finished): the tick closes a wave whose chunks are all done once the grace has passed,
    long before the stall rescue, and never one with a chunk still sent."""
    from sqlalchemy import select

    from embedq.jobs.dispatch import MIN_CHUNK_TEXTS
    from embedq.models import ChunkStatus, JobChunk
    from embedq.tasks import names

    jobs = jc.jobs()
    settings = jobs.service.settings
    job_id = jobs.submit([f"{salt} lost close {i}" for i in range(40)], start=False)
    job = jobs.store.get(job_id)
    generation = job.generation + 1
    assert jobs.store.transition(job_id, [JobStatus.QUEUED], job.generation,
                                 status=JobStatus.RUNNING, generation=generation,
                                 progress_at=datetime.now(UTC), started_at=datetime.now(UTC))
    chunks = jobs.store.next_wave(job_id, 2, MIN_CHUNK_TEXTS, settings.jobs.chunk_max_texts)
    assert chunks and jobs.store.sent_chunks(job_id) == len(chunks)
    grace = jobs.dispatcher.close_grace()
    assert grace.total_seconds() < settings.jobs.stall_s

    def running_at(generation: int) -> bool:
        job = jobs.store.get(job_id)
        return job.status == JobStatus.RUNNING and job.generation == generation

    # A tick while a chunk is sent closes nothing, however late (the other jobs in this
    # database are the tick's too: only this job's state is asserted).
    jobs.tick(datetime.now(UTC) + grace * 2)
    assert running_at(generation)
    # The wave's chunks without their chord: as if its callback had been lost.
    for c in chunks:
        jobs.service.app.send_task(names.BULK_CHUNK, args=[job_id, c, generation],
                                   queue=settings.queue.bulk_queue)
    deadline = time.monotonic() + 60
    while jobs.store.sent_chunks(job_id) and time.monotonic() < deadline:
        time.sleep(0.1)
    with jobs.service.db.session() as s:
        statuses = set(s.scalars(select(JobChunk.status).where(JobChunk.job_id == job_id)))
    assert statuses == {ChunkStatus.DONE}, statuses
    # Within the grace the close is left to the callback; past it, the tick closes.
    jobs.tick()
    assert running_at(generation)
    assert jobs.tick(datetime.now(UTC) + grace)["closed"] >= 1
    state = jobs.describe(job_id)
    assert state["status"] == "succeeded" and state["progress"]["done"] == 40, state
