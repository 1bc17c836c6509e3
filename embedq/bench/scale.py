"""`embedq bench scale`: how throughput grows with workers and with API replicas.

The encoder is an I/O-bound upstream (embedq.testing.fake_upstream on loopback, LATENCY_MS
a call, UPSTREAM_SLOTS calls at once), so what limits a worker is its upstream calls, not
the two cores of a development machine: each worker may have one call in flight
(EMBEDQ_UPSTREAM_CONCURRENCY=1) of at most BATCH_TEXTS texts.

1. Workers: for k in --workers (1, 2, 4, 8), k `embedq worker` processes on queues of
   their own and a bulk job of k x --per-worker distinct texts, submitted from this
   process once every worker beats (a worker beats once its consumer takes messages);
   texts/s from the job's own started/finished times. Then a second job, the largest
   k's size at every k (so it lasts k_max/k times as long, and every k's p99 comes from
   about as many probes), during which k probers (threads of one process of their own,
   as online callers are other processes than a job's submitter) each send one online
   one-text miss at random moments, PROBE_S apart on average (the same online load per
   worker at every k), measure the online p99 under load (apart, as probes take upstream
   slots). Linearity at k: texts/s at k over k times texts/s at 1.
2. Replicas: for r in --replicas (1, 2, 4), r `embedq serve` processes and 2 workers, 50
   callers sending Zipf(1.1)-drawn one-text requests round robin over the replicas;
   duplicates = texts the upstream computed more than once (its own count). Each r runs
   with the coordination store on the configured Redis and on a local Redis Cluster of 3
   masters (`--replicas-on`; the broker stays the configured one).
3. Health index at the largest k: linearity x (1 - p99 tail growth) x (distinct texts /
   forward passes), the tail growth being the online p99 at k over the p99 at 1, minus 1
   (clipped to [0, 1]), the forward passes the texts the upstream computed in that run.

Needs Redis and Postgres (EMBEDQ_BROKER_URL, EMBEDQ_REDIS_URL, EMBEDQ_DATABASE_URL), and
redis-server on this machine for the cluster. The load average is reported at the start
and the end: on a shared machine it says what the figures were measured under.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from embedq.bench.coalesce import upstream_env
from embedq.bench.stats import percentile
from embedq.config import Settings
from embedq.corpus import load_texts
from embedq.errors import ConfigError, Unavailable
from embedq.jobs.dispatch import workers_on
from embedq.jobs.service import JobService
from embedq.models import JobStatus
from embedq.service import EmbeddingService
from embedq.testing import loadgen, processes
from embedq.testing.redis_cluster import LocalRedisCluster

LATENCY_MS = 100.0
UPSTREAM_SLOTS = 256
BATCH_TEXTS = 16
PROBE_S = 0.25
CALLERS = 50
REPLICA_WORKERS = 2
START_DEADLINE_S = 180.0


class _Upstream:
    def __init__(self, port: int, pid: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.env = upstream_env(port)
        self.pid = pid

    def reset(self) -> None:
        httpx.post(self.url + "/reset", timeout=10).raise_for_status()

    def stats(self) -> dict[str, int]:
        data: dict[str, int] = httpx.get(self.url + "/stats", timeout=10).json()
        return data


def _env(upstream: _Upstream, tag: str) -> dict[str, str]:
    return {**upstream.env, "EMBEDQ_ONLINE_QUEUE": f"scale-{tag}",
            "EMBEDQ_BULK_QUEUE": f"scale-bulk-{tag}", "EMBEDQ_UPSTREAM_CONCURRENCY": "1",
            "EMBEDQ_BATCH_MAX_TEXTS": str(BATCH_TEXTS)}


@contextlib.contextmanager
def _workers(env: dict[str, str], k: int, tmp: Path, service: EmbeddingService
             ) -> Iterator[list[int]]:
    """k workers on env's queues, their pids yielded once every one of them beats."""
    logs = [tmp / f"worker-{k}-{i}.log" for i in range(k)]
    procs = [processes.spawn_worker(env, log) for log in logs]
    try:
        count, queue = workers_on(service.hot), service.settings.queue.bulk_queue
        deadline = time.monotonic() + START_DEADLINE_S
        while count(queue) < k:
            exited = [log for p, log in zip(procs, logs, strict=True) if p.poll() is not None]
            if exited or time.monotonic() > deadline:
                tail = (exited or logs)[0].read_text(errors="replace")[-2000:]
                raise Unavailable(f"{k} workers did not all start within "
                                  f"{START_DEADLINE_S:.0f} s; a worker's log:\n{tail}")
            time.sleep(0.2)
        yield [p.pid for p in procs]
    finally:
        for proc in procs:
            processes.stop(proc)


def _probe(service: EmbeddingService, tag: str, seed: int, stop: Any) -> list[float]:
    """One caller's online misses until `stop`: the gaps between them are drawn from an
    exponential distribution of mean PROBE_S (arrivals at random moments). A fixed gap
    locked the caller's phase to its worker's call cycle: 1 worker's probes spread over
    10 ms (p50 174, p99 184 ms) behind a 100 ms call that a probe arriving at a random
    moment waits 0-100 ms for, and k callers started together sent k probes at once."""
    gaps = np.random.default_rng(seed)
    latencies: list[float] = []
    n = 0
    while not stop.wait(float(gaps.exponential(PROBE_S))):
        started = time.perf_counter()
        service.embed([f"{tag} online probe {n}"], timeout_s=30)
        latencies.append((time.perf_counter() - started) * 1000)
        n += 1
    return latencies


def _probers(env: dict[str, str], tag: str, k: int, ready: Any, stop: Any, out: Any) -> None:
    """k probers in a process of their own (a multiprocessing child): online callers are
    other processes than the one submitting a job. In the bench's own process, the
    submission of 12,800 texts held the interpreter lock while the probes waited to
    publish or to read their answer (30-150 ms before the publish alone at 8 workers)."""
    service = EmbeddingService(Settings.from_env(
        {key: v for key, v in env.items() if key.startswith("EMBEDQ_")}))
    probes: list[float] = []
    try:
        service.warm_up()  # as `embedq serve` does: the callers stand for API processes
        threads = [threading.Thread(target=lambda n=n: probes.extend(
            _probe(service, f"{tag}-{n}", n, stop))) for n in range(k)]
        for thread in threads:
            thread.start()
        ready.set()
        for thread in threads:
            thread.join()
    finally:
        service.close()
        out.put(probes)


def _workers_run(upstream: _Upstream, k: int, texts: list[str], load: list[str], tmp: Path
                 ) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    env = _env(upstream, tag)
    service = EmbeddingService(Settings.from_env(
        {key: v for key, v in env.items() if key.startswith("EMBEDQ_")}))
    try:
        jobs = JobService(service)
        with _workers(env, k, tmp, service) as pids:
            upstream.reset()
            cpu = [_cpu_s(pids), _cpu_s([upstream.pid])]
            job = _wait(jobs, jobs.submit([f"{tag}-{i} {t}" for i, t in enumerate(texts)]))
            stats = upstream.stats()
            cpu = [_cpu_s(pids) - cpu[0], _cpu_s([upstream.pid]) - cpu[1]]
            # The online p99 under load, from a second job: probes take upstream slots, so
            # the throughput above is measured without them. That job is as large at every
            # k (`load`: the largest k's), so it lasts k_max/k times as long at k and each
            # k's p99 comes from as many probes as the largest k's: from a job of k's own
            # size, 1 worker's p99 came from 34 probes (174.7-263.3 ms in six runs).
            probes = _probed(env, tag, k, lambda: _wait(jobs, jobs.submit(
                [f"{tag}-load-{i} {t}" for i, t in enumerate(load)])))
    finally:
        service.close()
    assert job.started_at is not None and job.finished_at is not None
    seconds = (job.finished_at - job.started_at).total_seconds()
    row = {"workers": k, "texts": len(texts), "job_s": round(seconds, 2),
           "texts_per_s": round(len(texts) / seconds, 1), "chunks": job.chunks,
           "online_p99_ms": round(percentile(probes, 99), 1) if probes else None,
           "probes": len(probes), "probe_job_texts": len(load),
           "forward_passes": stats["texts"],
           "distinct_texts": stats["distinct_texts"],
           # CPU the job cost the workers and the upstream, and the cores that took
           # meanwhile: what a machine must give them, against what it has.
           "worker_cpu_ms_per_text": round(cpu[0] * 1000 / len(texts), 3),
           "upstream_cpu_ms_per_text": round(cpu[1] * 1000 / len(texts), 3),
           "cores_used": round((cpu[0] + cpu[1]) / seconds, 2)}
    print(f"  {k} worker(s): {row['texts']} texts in {row['job_s']} s = "
          f"{row['texts_per_s']} texts/s, {row['chunks']} chunks, upstream computed "
          f"{row['forward_passes']} texts for {row['distinct_texts']} distinct; online "
          f"p99 under load {row['online_p99_ms']} ms ({row['probes']} probes); CPU a "
          f"text: workers {row['worker_cpu_ms_per_text']} ms, upstream "
          f"{row['upstream_cpu_ms_per_text']} ms; {row['cores_used']} cores used")
    return row


def _probed(env: dict[str, str], tag: str, k: int, load: Callable[[], object]
            ) -> list[float]:
    """The latencies of k probers (`_probers`, in a child process) while `load` runs."""
    context = multiprocessing.get_context("spawn")
    ready, stop, out = context.Event(), context.Event(), context.Queue()
    child = context.Process(target=_probers, args=(env, tag, k, ready, stop, out))
    child.start()
    try:
        deadline = time.monotonic() + START_DEADLINE_S
        while not ready.wait(0.5):
            if not child.is_alive() or time.monotonic() > deadline:
                raise Unavailable("the probers' process did not start (exit code "
                                  f"{child.exitcode}) within {START_DEADLINE_S:.0f} s")
        load()
    finally:
        stop.set()
    probes: list[float] = out.get(timeout=START_DEADLINE_S)
    child.join(timeout=30)
    return probes


def _cpu_s(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes used so far, from /proc (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            # After the command's closing parenthesis: utime and stime are fields 12, 13.
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / tick


def _wait(jobs: JobService, job_id: str) -> Any:
    while True:
        job = jobs.store.get(job_id)
        if job.status in JobStatus.final():
            if job.status != JobStatus.SUCCEEDED:
                raise Unavailable(f"the bench job ended {job.status}: {job.error}")
            return job
        time.sleep(0.1)


def _replicas_run(upstream: _Upstream, r: int, corpus: list[str], tmp: Path,
                  requests: int, redis: str, redis_url: str | None) -> dict[str, Any]:
    """`redis_url`: the coordination store's (a cluster's); None: the configured one."""
    tag = uuid.uuid4().hex[:8]
    env = _env(upstream, tag)
    env["EMBEDQ_UPSTREAM_CONCURRENCY"] = "8"
    if redis_url is not None:
        env["EMBEDQ_REDIS_URL"] = redis_url
    ranks = np.random.default_rng(11).zipf(1.1, size=requests)
    draws = [f"{tag} {corpus[(int(x) - 1) % len(corpus)]}" for x in ranks]
    service = EmbeddingService(Settings.from_env(
        {key: v for key, v in env.items() if key.startswith("EMBEDQ_")}))
    ports = processes.free_ports(r)
    apis = [processes.spawn_api(env, port, tmp / f"api-{r}-{n}.log")
            for n, port in enumerate(ports)]
    try:
        with _workers(env, REPLICA_WORKERS, tmp, service):
            for port in ports:
                processes.wait_http(f"http://127.0.0.1:{port}/readyz", START_DEADLINE_S)
            upstream.reset()
            urls = [f"http://127.0.0.1:{p}/v1/embeddings" for p in ports]
            bodies = [{"model": "fake-embed", "input": [t]} for t in draws]
            wall = asyncio.run(loadgen.fire(urls, bodies, CALLERS))
            stats = upstream.stats()
    finally:
        for proc in apis:
            processes.stop(proc)
        service.close()
        service.hot.close()  # its listener, before a cluster it reads stops
    distinct = len(set(draws))
    row = {"replicas": r, "redis": redis, "requests": requests, "distinct_texts": distinct,
           "forward_passes": stats["texts"], "duplicates": stats["texts"] - distinct,
           "wall_s": round(wall, 2), "requests_per_s": round(requests / wall, 1)}
    print(f"  {r} API replica(s), {redis} Redis: {requests} requests over {distinct} "
          f"distinct texts, "
          f"upstream computed {row['forward_passes']} ({row['duplicates']} duplicates), "
          f"{row['requests_per_s']} requests/s")
    return row


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    base = rows[0]
    for row in rows:
        row["linearity"] = round(row["texts_per_s"] / (row["workers"] / base["workers"]
                                                       * base["texts_per_s"]), 3)
    top = rows[-1]
    growth = 0.0
    if base["online_p99_ms"] and top["online_p99_ms"]:
        growth = min(1.0, max(0.0, top["online_p99_ms"] / base["online_p99_ms"] - 1))
    dedup = top["distinct_texts"] / max(1, top["forward_passes"])
    return {"workers_at": top["workers"], "linearity": top["linearity"],
            "p99_tail_growth": round(growth, 3), "distinct_per_pass": round(dedup, 4),
            "health_index": round(top["linearity"] * (1 - growth) * dedup, 3)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings.from_env()
    if settings.embedded:
        raise ConfigError("bench scale measures processes working together: set "
                          "EMBEDQ_BROKER_URL, EMBEDQ_REDIS_URL and EMBEDQ_DATABASE_URL")
    counts = sorted(set(args.workers))
    if not counts or counts[0] < 1:
        raise ConfigError("--workers takes worker counts of at least 1, e.g. 1 2 4 8")
    where = sorted(set(args.replicas_on), key=["single", "cluster"].index)
    if "cluster" in where and (shutil.which("redis-server") is None
                               or shutil.which("redis-cli") is None):
        raise ConfigError("bench scale starts a local Redis Cluster for its replicas: "
                          "install redis-server (apt-get install redis-server), or pass "
                          "--replicas-on single")
    corpus = list(dict.fromkeys(load_texts(5000, args.file)))
    need = counts[-1] * args.per_worker
    report: dict[str, Any] = {"upstream_latency_ms": LATENCY_MS, "batch_texts": BATCH_TEXTS,
                              "per_worker": args.per_worker,
                              "load_average_at_start": _load()}
    print(f"bench scale: upstream {LATENCY_MS:.0f} ms a call, one call of at most "
          f"{BATCH_TEXTS} texts in flight per worker")
    with tempfile.TemporaryDirectory(prefix="embedq-bench-scale-") as tmpdir:
        tmp = Path(tmpdir)
        port = processes.free_port()
        proc = processes.spawn_fake_upstream(port, LATENCY_MS, UPSTREAM_SLOTS,
                                             tmp / "upstream.log")
        try:
            processes.wait_http(f"http://127.0.0.1:{port}/stats")
            upstream = _Upstream(port, proc.pid)
            texts = [corpus[i % len(corpus)] for i in range(need)]
            rows = [_workers_run(upstream, k, texts[:k * args.per_worker], texts, tmp)
                    for k in counts]
            report["workers"] = rows
            report["health"] = _summary(rows)
            report["replicas"] = [
                _replicas_run(upstream, r, corpus, tmp, args.requests, "single", None)
                for r in sorted(set(args.replicas))] if "single" in where else []
            if "cluster" in where:
                cluster = LocalRedisCluster(tmp / "cluster", replicas=0)
                cluster.start()
                try:
                    report["replicas"] += [
                        _replicas_run(upstream, r, corpus, tmp, args.requests, "cluster",
                                      cluster.url) for r in sorted(set(args.replicas))]
                finally:
                    cluster.stop()
        finally:
            processes.stop(proc)
    report["load_average_at_end"] = _load()
    h = report["health"]
    print(f"linearity at {h['workers_at']} workers: {h['linearity']}; p99 tail growth "
          f"{h['p99_tail_growth']}; distinct/passes {h['distinct_per_pass']}; health index "
          f"{h['health_index']}")
    for row in rows:
        print(f"  {row['workers']} worker(s): linearity {row['linearity']}")
    print(f"load average (1 min) at start {report['load_average_at_start']}, at end "
          f"{report['load_average_at_end']} on {os.cpu_count()} cores")
    return report


def _load() -> float:
    return round(os.getloadavg()[0], 2)
