"""`embedq bench bulk --via-jobs` on real Redis and Postgres: it refuses to start without a
live worker for its model instead of waiting forever for a job nobody runs."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest

from embedq.bench.jobs import live_workers_serving, require_live_worker
from embedq.coordination import make_hot_store
from embedq.errors import Unavailable
from tests import support

pytestmark = pytest.mark.integration


def test_via_jobs_without_a_live_worker_exits_at_once_naming_what_to_start(
    redis_url: str, pg_url: str
) -> None:
    # A model no worker serves: any worker another test left running does not count.
    env = support.cluster_env(redis_url, pg_url, model=f"no-worker-{uuid.uuid4().hex[:8]}")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "embedq.cli", "bench", "bulk", "--via-jobs", "--n", "50"],
        env=env, cwd=support.ROOT, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode != 0
    assert "needs a live worker" in done.stderr
    assert "`embedq worker`" in done.stderr and "`embedq beat`" in done.stderr
    assert time.monotonic() - started < 30


def test_a_worker_heartbeat_for_the_model_is_what_lets_it_start(
    redis_url: str, pg_url: str
) -> None:
    model = f"bench-model-{uuid.uuid4().hex[:8]}"
    settings = support.settings_from(support.cluster_env(redis_url, pg_url, model=model))
    hot = make_hot_store(settings)
    hot.heartbeat(f"other-{model}", {"model": "another-model", "revision": "hashing-v2"}, 30)
    with pytest.raises(Unavailable, match=r"live for other models.*`embedq worker`"):
        require_live_worker(settings)
    hot.heartbeat(f"w-{model}", {"model": model, "revision": "hashing-v2"}, 30)
    require_live_worker(settings)


def test_a_worker_that_stops_is_not_counted_live_a_moment_later(
    redis_url: str, pg_url: str, tmp_path: Path
) -> None:
    """Its heartbeat lives 15 s; a worker stopped cleanly takes it back as it exits, so a
    bench (or /readyz) started right after does not wait on a worker that is gone."""
    model = f"stopping-{uuid.uuid4().hex[:8]}"
    env = support.cluster_env(redis_url, pg_url, model=model, online_queue=f"o-{model}",
                              bulk_queue=f"b-{model}")
    settings = support.settings_from(env)
    worker = support.WorkerProcess(env, tmp_path / "worker.log").start()
    assert live_workers_serving(settings)[0] == 1
    worker.stop()
    assert worker.proc is not None and worker.proc.returncode is not None
    assert live_workers_serving(settings)[0] == 0


def test_bench_http_reports_misses_against_bare_batched_encode(tmp_path: Path) -> None:
    """Embedded (no servers), the hashing encoder: the bench starts `embedq serve`, runs both
    phases and reports the throughput ratio the online-path target is stated in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDQ_")}
    env.update({"EMBEDQ_ENCODER": "hashing", "EMBEDQ_DATA_DIR": str(tmp_path)})
    done = subprocess.run(
        [sys.executable, "-m", "embedq.cli", "bench", "http", "--n", "150", "--json"],
        env=env, cwd=support.ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "misses/s / bare batched" in done.stdout
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["mode"] == "embedded" and report["requests"] == 100
    assert report["bare_batched_texts_per_s"] > 0 and report["miss"]["requests_per_s"] > 0
    assert report["misses_over_bare_batched"] == round(
        report["miss"]["requests_per_s"] / report["bare_batched_texts_per_s"], 3)


def test_bench_http_sends_the_same_load_to_a_peer_server(tmp_path: Path) -> None:
    """--peer: the miss phase's load, on texts of its own, through the same client against
    another OpenAI-compatible server (here the fake upstream, no latency), reported beside
    the misses; a peer given without http:// is refused with what to give."""
    from embedq.testing import processes

    port = processes.free_port()
    peer = processes.spawn_fake_upstream(port, 0.0, 64, tmp_path / "peer.log")
    try:
        processes.wait_http(f"http://127.0.0.1:{port}/stats")
        env = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDQ_")}
        env.update({"EMBEDQ_ENCODER": "hashing", "EMBEDQ_DATA_DIR": str(tmp_path)})
        base = [sys.executable, "-m", "embedq.cli", "bench", "http", "--n", "150"]
        done = subprocess.run([*base, "--json", "--peer", f"http://127.0.0.1:{port}"],
                              env=env, cwd=support.ROOT, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert report["peer"]["requests_per_s"] > 0 and report["peer"]["slices"] == 4
        assert report["misses_over_peer"] == round(
            report["miss"]["requests_per_s"] / report["peer"]["requests_per_s"], 3)
        stats = httpx.get(f"http://127.0.0.1:{port}/stats", timeout=30).json()
        assert stats["texts"] == 150  # 50 to warm it, then as many as the miss phase
        refused = subprocess.run([*base, "--peer", f"127.0.0.1:{port}"], env=env,
                                 cwd=support.ROOT, capture_output=True, text=True,
                                 timeout=300)
        assert refused.returncode != 0 and "http://HOST:PORT" in refused.stderr
    finally:
        processes.stop(peer)


def test_bench_http_on_a_cluster_starts_the_worker_its_misses_need(
    redis_url: str, pg_url: str
) -> None:
    """On Redis and Postgres, with misses queued for workers and none live for the model,
    the bench starts `embedq worker` beside `embedq serve` (it waited for a worker that
    nobody started, then gave up), runs both phases with its temporary key, and stops both."""
    tag = uuid.uuid4().hex[:8]
    env = support.cluster_env(redis_url, pg_url, encoder="hashing", model=f"http-{tag}",
                              online_queue=f"http-{tag}", bulk_queue=f"http-bulk-{tag}")
    env["EMBEDQ_ONLINE_ENCODE"] = "queue"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "embedq.cli", "bench", "http", "--n", "150", "--json"],
        env=env, cwd=support.ROOT, capture_output=True, text=True, timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["mode"] == "cluster" and report["online_encode"] == "queue"
    assert report["started"] == ["serve", "worker"]
    assert report["miss"]["requests_per_s"] > 0 and report["hit"]["requests_per_s"] > 0
    assert time.monotonic() - started < 200


def test_bench_pipeline_measures_bulk_and_online_against_the_storage_floor(
    redis_url: str, pg_url: str
) -> None:
    """On Redis and Postgres: the bench starts serve and a worker on the hashing encoder,
    runs a bulk job of distinct texts, the storage floor and both online phases, and
    reports each ratio with the CPU and stage figures behind it."""
    tag = uuid.uuid4().hex[:8]
    env = support.cluster_env(redis_url, pg_url, model=f"pipe-{tag}",
                              online_queue=f"pipe-{tag}", bulk_queue=f"pipe-bulk-{tag}")
    env["EMBEDQ_ONLINE_ENCODE"] = "queue"
    done = subprocess.run(
        [sys.executable, "-m", "embedq.cli", "bench", "pipeline", "--n", "400", "--rounds",
         "2", "--json"],
        env=env, cwd=support.ROOT, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    bulk, floor, online = report["bulk"], report["floor"], report["online"]
    assert report["texts"] == 400 and bulk["encoded"] == 400  # distinct, none cached
    assert report["bulk_over_floor"] == round(bulk["texts_per_s"] / floor["texts_per_s"], 3)
    job = bulk["job"]  # the job's own timeline, inside the command's wall time
    assert job["items_stored_s"] >= 0 and job["run_s"] > 0 and 0 < job["outside_s"] < 60
    assert bulk["wall_s"] == pytest.approx(400 / job["texts_per_s"] + job["outside_s"], abs=0.05)
    assert report["job_over_floor"] == round(job["texts_per_s"] / floor["texts_per_s"], 3)
    assert 0 < bulk["model_busy_share"] <= 1
    assert {"fencing", "encode", "writer"} <= set(bulk["stage_cpu_ms_per_text"])
    assert online["miss"]["requests_per_s"] > 0 and online["hit"]["requests_per_s"] > 0
    assert {"lookup", "claims", "publish"} <= set(online["miss_stage_cpu_ms_per_text"])
    # The API's CPU a request in each phase: a hit is answered by the API alone.
    assert online["hit_cpu_ms_per_text"]["serve"] > 0
    assert online["miss_cpu_ms_per_text"]["serve"] > 0
    assert len(online["ratios"]) == 2 and all(x > 0 for x in online["ratios"])
    assert report["misses_over_hits"] == statistics.median(online["ratios"])
    assert "bulk / floor" in done.stdout and "median of 2 rounds" in done.stdout
    assert "job / floor" in done.stdout and "hits, CPU ms a text: " in done.stdout


def test_bench_pipeline_vector_writes_prints_the_copy_threshold_table(
    pg_url: str, tmp_path: Path
) -> None:
    """`--vector-writes`: the table COPY_MIN_ROWS was chosen from, every batch size with
    both ways' costs, and none of the rows it wrote left behind; not on SQLite."""
    from embedq.bench.vector_writes import MODEL, SIZES
    from embedq.models.vectors import COPY_MIN_ROWS

    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDQ_")}
    env.update({"HOME": str(tmp_path), "EMBEDQ_DATABASE_URL": pg_url})
    done = subprocess.run(
        [sys.executable, "-m", "embedq.cli", "bench", "pipeline", "--vector-writes", "--json"],
        env=env, cwd=support.ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert [r["rows"] for r in report["table"]] == list(SIZES)
    assert all(r[f"{way}_{k}"] > 0 for r in report["table"] for way in ("insert", "copy")
               for k in ("wall_us", "client_us"))
    assert report["copy_min_rows"] == COPY_MIN_ROWS
    assert f"batches of {COPY_MIN_ROWS} rows or more go in by COPY" in done.stdout
    with psycopg.connect(pg_url) as conn:
        left = conn.execute("SELECT count(*) FROM embeddings WHERE model = %s",
                            (MODEL,)).fetchone()
    assert left == (0,)
    env["EMBEDQ_DATABASE_URL"] = f"sqlite:///{tmp_path / 'e.db'}"
    refused = subprocess.run(
        [sys.executable, "-m", "embedq.cli", "bench", "pipeline", "--vector-writes"],
        env=env, cwd=support.ROOT, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "point EMBEDQ_DATABASE_URL at a Postgres" in refused.stderr


def test_bench_pipeline_embedded_runs_a_job_with_no_servers(tmp_path: Path) -> None:
    """`--embedded`: one bulk job through the embedded pipeline (what `make gpu-check`
    runs on a GPU), every text encoded, with its rate and model-busy share; the EMBEDQ_*
    servers in the environment are not used."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDQ_")}
    env.update({"HOME": str(tmp_path), "EMBEDQ_REDIS_URL": "redis://127.0.0.1:1/0",
                "EMBEDQ_BROKER_URL": "redis://127.0.0.1:1/0",
                "EMBEDQ_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"})
    done = subprocess.run(
        [sys.executable, "-m", "embedq.cli", "bench", "pipeline", "--embedded", "--n", "300",
         "--json"], env=env, cwd=support.ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["texts"] == 300 and report["job_texts_per_s"] > 0
    assert report["job_texts_per_s"] == pytest.approx(300 / report["job_wall_s"], rel=0.05)
    assert 0 < report["model_busy_share"] <= 1 and report["batch"] == 64
    assert "bench pipeline --embedded" in done.stdout and "model-busy share" in done.stdout


def test_bench_pipeline_embedded_paces_a_stand_in_device_and_reports_the_job_over_it(
        tmp_path: Path) -> None:
    """`--device MS,US`: the model is a stand-in whose forward pass waits that long (the
    interpreter lock released), in batches of 512; the job is reported over its bare rate,
    which the pacing bounds (a pass of 512 texts takes at least 2 + 4.096 ms)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDQ_")}
    env["HOME"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "embedq.cli", "bench", "pipeline", "--embedded", "--device",
         "2,8", "--n", "1200", "--json"],
        env=env, cwd=support.ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["batch"] == 512 and report["texts"] == 1200
    assert 0 < report["bare_texts_per_s"] <= 512 / 0.006096
    assert report["job_over_bare"] == round(report["job_texts_per_s"]
                                            / report["bare_texts_per_s"], 3)
    assert "stand-in device (2 ms a forward pass + 8 us a text" in done.stdout
    assert "job / model" in done.stdout
    refused = subprocess.run(
        [sys.executable, "-m", "embedq.cli", "bench", "pipeline", "--device", "2,8"],
        env=env, cwd=support.ROOT, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "add --embedded" in refused.stderr


def test_a_bench_that_runs_a_job_starts_a_worker_even_when_the_api_encodes_locally(
    redis_url: str, pg_url: str, tmp_path: Path
) -> None:
    """EMBEDQ_ONLINE_ENCODE=local: online misses need no worker, a job does. `bench
    pipeline` once waited forever on a bulk job nobody ran in that mode."""
    from embedq.bench.cluster import cluster

    tag = uuid.uuid4().hex[:8]
    env = support.cluster_env(redis_url, pg_url, model=f"local-{tag}",
                              online_queue=f"local-{tag}", bulk_queue=f"local-bulk-{tag}")
    env["EMBEDQ_ONLINE_ENCODE"] = "local"
    settings = support.settings_from(env)
    saved = dict(os.environ)
    os.environ.update(env)  # the processes it starts take this environment
    try:
        with cluster(settings, tmp_path, jobs=False) as online_only:
            assert "worker" not in online_only.started
        with cluster(settings, tmp_path, jobs=True) as target:
            assert "worker" in target.started
            assert live_workers_serving(settings)[0] == 1  # beating before the bench starts
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_bench_scale_measures_linearity_and_duplicates_across_replicas(
    redis_url: str, pg_url: str
) -> None:
    """On Redis and Postgres with the fake upstream: a job per worker count, timed by the
    job itself, and Zipf traffic through API replicas on one Redis and on a Redis
    Cluster, counted by the upstream."""
    env = support.cluster_env(redis_url, pg_url)
    done = subprocess.run(
        [sys.executable, "-m", "embedq.cli", "bench", "scale", "--workers", "1", "2",
         "--per-worker", "160", "--replicas", "2", "--requests", "120", "--json"],
        env=env, cwd=support.ROOT, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    one, two = report["workers"]
    assert (one["workers"], one["texts"], two["workers"], two["texts"]) == (1, 160, 2, 320)
    # The probing job is the largest k's at every k: as many probes behind each p99.
    assert one["probe_job_texts"] == two["probe_job_texts"] == 320
    assert two["linearity"] == round(two["texts_per_s"] / (2 * one["texts_per_s"]), 3)
    for row in report["workers"]:
        assert row["forward_passes"] == row["distinct_texts"] >= row["texts"]
        assert row["probes"] > 0 and row["online_p99_ms"] > 0
    assert [(r["replicas"], r["redis"]) for r in report["replicas"]] == [
        (2, "single"), (2, "cluster")]
    assert all(r["duplicates"] == 0 and r["forward_passes"] == r["distinct_texts"]
               for r in report["replicas"])
    assert report["load_average_at_start"] >= 0 and report["load_average_at_end"] >= 0
    health = report["health"]
    assert health["workers_at"] == 2 and 0 <= health["health_index"] <= 2
    assert "linearity at 2 workers" in done.stdout


def test_bench_scale_without_redis_server_names_the_package_or_the_flag(
    redis_url: str, pg_url: str, tmp_path: Path
) -> None:
    env = {**support.cluster_env(redis_url, pg_url), "PATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "embedq.cli", "bench", "scale", "--workers", "1"],
        env=env, cwd=support.ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode != 0
    assert "apt-get install redis-server" in done.stderr
    assert "--replicas-on single" in done.stderr
