"""`embedq bench pipeline`: the pipeline around the model, measured with a model that
costs nothing (the hashing encoder), against what its own storage absorbs.

On the EMBEDQ_* cluster (Redis + Postgres), in one run (`--embedded`: only a bulk job
through the embedded pipeline, no servers, as `make gpu-check` runs it on a GPU):
  1. bulk: N distinct texts (the held-out corpus split, salted so nothing is cached)
     through `embedq bulk FILE --now --wait` and one `embedq worker`; texts/s from start
     to the job's end;
  2. the storage floor: the same N vectors written by one client into the same servers,
     binary COPY into a table shaped like `embeddings` plus one Redis pipeline of SET
     with a ttl; texts/s; the bulk rate over it;
  3. online: 50 one-text clients against `embedq serve`, first misses (each text once),
     then the same texts again (all hits); misses/s over hits/s, in `--rounds` rounds
     (each on texts of its own) whose median is the ratio reported: on two cores one
     round's ratio moved by a tenth from run to run, with the servers' speed;
  4. where the CPU went: each process's CPU (the bulk command, the worker, the API, Redis,
     Postgres's backends), the per-stage CPU the processes counted (EMBEDQ_STAGE_TIMING,
     embedq/stages.py), and the model-busy share: the worker's forward-pass seconds over
     the job's wall seconds.
Processes it starts run with EMBEDQ_ENCODER=hashing and EMBEDQ_STAGE_TIMING=true, and are
stopped on the way out. The worker it starts is the only one consuming the queues it uses
(a live worker serving the hashing encoder is used instead).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from embedq.bench.cluster import cluster, preflight
from embedq.bench.http import CLIENTS, _phase
from embedq.config import Settings
from embedq.config.cluster_url import is_cluster
from embedq.corpus import load_texts
from embedq.errors import ConfigError
from embedq.stages import PREFIX, STAGES

TICKS = os.sysconf("SC_CLK_TCK")
FLOOR_TTL_S = 300


def run(args: argparse.Namespace) -> dict[str, Any]:
    os.environ.update({"EMBEDQ_ENCODER": "hashing", "EMBEDQ_STAGE_TIMING": "true"})
    settings = Settings.from_env()
    if args.device is not None and not args.embedded:
        raise ConfigError("bench pipeline --device MS,US paces the embedded pipeline's "
                          "stand-in model: add --embedded")
    if args.embedded:
        return _embedded(settings, args.n, args.device)
    if args.vector_writes:
        from embedq.bench import vector_writes

        return vector_writes.run(settings)
    if is_cluster(settings.links.redis_url):
        raise ConfigError(
            "bench pipeline weighs the pipeline against one Redis's floor and CPU: point "
            "EMBEDQ_REDIS_URL at a single Redis (redis://); `embedq bench scale --cluster` "
            "measures a Redis Cluster")
    preflight(settings)
    salt = uuid.uuid4().hex[:8]
    texts = [f"{salt} {i} {t}" for i, t in enumerate(load_texts(args.n, args.file,
                                                                 split="heldout"))]
    with tempfile.TemporaryDirectory(prefix="embedq-bench-pipeline-") as tmp, \
            cluster(settings, Path(tmp), jobs=True) as target:
        assert target.counters is not None
        bulk = _bulk(texts, Path(tmp), target.counters, target.started)
        floor = _floor(settings, texts)
        online = _online(target.url, target.headers, texts[: min(len(texts), 2000)], salt,
                         target.counters, target.started, args.rounds)
    report = {"texts": len(texts), "bulk": bulk, "floor": floor, "online": online,
              "bulk_over_floor": round(bulk["texts_per_s"] / floor["texts_per_s"], 3),
              "job_over_floor": round(bulk["job"]["texts_per_s"] / floor["texts_per_s"], 3),
              "misses_over_hits": statistics.median(online["ratios"])}
    _print(report)
    return report


def _embedded(settings: Settings, n: int, device: tuple[float, float] | None
              ) -> dict[str, Any]:
    """A bulk job of `n` texts through the embedded pipeline (no servers), as `make
    gpu-check` runs it on a GPU, with the free model, or with a stand-in for a device
    (`device`: ms a forward pass, us a text) in batches of 512 and over its bare rate."""
    from embedq.bench.gpu_pipeline import PacedEncoder, pipeline_job
    from embedq.encoders import model_identity

    if device is None:
        report = pipeline_job(settings, n, batch=settings.worker.batch_max_texts or 64)
        model = "hashing encoder (costs nothing)"
    else:
        settings = settings.with_overrides(batch_max_texts=512, batch_max_tokens=32_768)
        name = model_identity(settings, settings.model.tiers[0])[0]  # as load_encoder's
        report = pipeline_job(settings, n, batch=512, encoder=PacedEncoder(*device, name))
        model = (f"a stand-in device ({device[0]:g} ms a forward pass + {device[1]:g} us a "
                 "text, the interpreter lock released)")
    print(f"bench pipeline --embedded: {model}, {n} distinct texts, one job (SQLite, "
          f"in-process broker and store, a worker thread)\n"
          f"  job: {report['job_texts_per_s']:.0f} texts/s ({report['job_wall_s']} s), "
          f"model-busy share {report['model_busy_share']}; the model alone "
          f"{report['bare_texts_per_s']:.0f} texts/s in batches of {report['batch']}"
          + (f"; job / model = {report['job_over_bare']}" if device else ""))
    return report


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and its threads (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def named_cpu_s(name: str) -> float:
    """CPU seconds of every process on this machine named `name` (Postgres's backends)."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            raw = stat.read_text()
        except OSError:
            continue
        if raw[raw.index("(") + 1:raw.rindex(")")] == name:
            total += _cpu_s(int(stat.parent.name))
    return total


def _redis_cpu_s(settings: Settings) -> float:
    import redis

    info = redis.Redis.from_url(str(settings.links.redis_url)).info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _bulk(texts: list[str], tmp: Path, counters: Any, started: dict[str, int]
          ) -> dict[str, Any]:
    settings = Settings.from_env()
    path = tmp / "bulk.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    worker = started.get("worker")
    before = (counters(), _cpu_s(worker) if worker else 0.0, _redis_cpu_s(settings),
              named_cpu_s("postgres"))
    began = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen([sys.executable, "-m", "embedq.cli", "bulk", str(path),
                                 "--now", "--wait"], stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - began
        if status != 0:
            raise SystemExit(f"embedq bulk failed ({status}): "
                             f"{(proc.stderr.read() if proc.stderr else b'').decode()[-2000:]}")
        out.seek(0)
        job = _job_phases(settings, out.read().decode().split()[-1], len(texts), wall)
    time.sleep(6)  # one heartbeat: the worker's last stage timings reach the counters
    after = (counters(), _cpu_s(worker) if worker else 0.0, _redis_cpu_s(settings),
             named_cpu_s("postgres"))
    delta = {k: after[0].get(k, 0) - before[0].get(k, 0) for k in after[0]}
    return {
        "texts_per_s": round(len(texts) / wall, 1), "wall_s": round(wall, 2),
        "encoded": delta.get("encoded", 0),
        "model_busy_share": round(delta.get("model_busy_us", 0) / 1e6 / wall, 3),
        "cpu_ms_per_text": {
            "bulk_command": round((usage.ru_utime + usage.ru_stime) * 1000 / len(texts), 3),
            "worker": round((after[1] - before[1]) * 1000 / len(texts), 3) if worker else None,
            "redis": round((after[2] - before[2]) * 1000 / len(texts), 3),
            "postgres": round((after[3] - before[3]) * 1000 / len(texts), 3)},
        "stage_cpu_ms_per_text": _stages(delta, len(texts)),
        "job": job,
    }


def _pg_url(settings: Settings) -> str:
    """The database URL as psycopg reads it (the bench talks to Postgres directly)."""
    from embedq.models.engine import normalize_url

    return normalize_url(settings.resolved_database_url).replace("postgresql+psycopg",
                                                                 "postgresql")


def _job_phases(settings: Settings, job_id: str, n: int, wall: float) -> dict[str, Any]:
    """The job's own timeline from its row: its items stored (created to started), its run
    (started to finished), its texts/s from created to finished, and what the command
    spent outside the job (its start: imports, reading the file; its exit)."""
    import psycopg

    url = _pg_url(settings)
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT created_at, started_at, finished_at FROM jobs WHERE id = %s",
                           (job_id,)).fetchone()
    if row is None or None in row:
        raise SystemExit(f"bench pipeline: job {job_id} has no finished timeline: {row}")
    created, started, finished = row
    total = (finished - created).total_seconds()
    return {"id": job_id, "items_stored_s": round((started - created).total_seconds(), 3),
            "run_s": round((finished - started).total_seconds(), 3),
            "texts_per_s": round(n / total, 1), "outside_s": round(wall - total, 3)}


def _stages(delta: dict[str, int], n: int) -> dict[str, float]:
    return {s: round(delta.get(PREFIX + s, 0) / 1000 / n, 4) for s in STAGES
            if delta.get(PREFIX + s, 0)}


def _floor(settings: Settings, texts: list[str]) -> dict[str, Any]:
    """The same vectors, by the fastest path each server offers, from one client."""
    import psycopg
    import redis

    from embedq.encoders.hashing import REVISION, HashingEncoder
    from embedq.fingerprint import EncodeSpec, fingerprint
    from embedq.models.engine import copy_rows
    from embedq.models.vectors import to_bytes

    spec = EncodeSpec("hashing", REVISION)
    matrix = HashingEncoder().encode(texts)
    rows = [(fingerprint(spec, t), spec.model, spec.revision, int(v.shape[0]), spec.dtype,
             to_bytes(v)) for t, v in zip(texts, matrix, strict=True)]
    url = _pg_url(settings)
    client = redis.Redis.from_url(str(settings.links.redis_url))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TEMP TABLE floor_rows (LIKE embeddings INCLUDING ALL)")
        began = time.perf_counter()
        copy_rows(conn, "floor_rows (fingerprint, model, revision, dimensions, dtype, vector)",
                  ["text", "text", "text", "int4", "text", "bytea"], rows)
        pg_s = time.perf_counter() - began
    keys = [f"embedq-bench:floor:{row[0]}" for row in rows]
    began = time.perf_counter()
    pipe = client.pipeline(transaction=False)
    for key, row in zip(keys, rows, strict=True):
        pipe.set(key, row[5], ex=FLOOR_TTL_S)
    pipe.execute()
    redis_s = time.perf_counter() - began
    client.delete(*keys)
    return {"texts_per_s": round(len(texts) / (pg_s + redis_s), 1),
            "postgres_copy_s": round(pg_s, 3), "redis_pipeline_s": round(redis_s, 3)}


def _online(url: str, headers: dict[str, str], texts: list[str], salt: str,
            counters: Any, started: dict[str, int], rounds: int = 1) -> dict[str, Any]:
    """Round 1 counts the CPU of its misses; every round's misses/s over hits/s is in
    `ratios` (the rounds after the first on texts of their own)."""
    pool = [f"online {t}" for t in texts]
    asyncio.run(_phase(url, headers, [f"warm {salt} {i}" for i in range(CLIENTS)],
                       warm=True))
    pids = {name: pid for name, pid in started.items()}
    before = (counters(), {n: _cpu_s(p) for n, p in pids.items()})
    misses = asyncio.run(_phase(url, headers, pool))
    time.sleep(6)  # one heartbeat: the worker's last stage timings reach the counters
    after = (counters(), {n: _cpu_s(p) for n, p in pids.items()})
    hits = asyncio.run(_phase(url, headers, random.sample(pool, len(pool))))
    hit_cpu = {n: _cpu_s(p) for n, p in pids.items()}
    delta = {k: after[0].get(k, 0) - before[0].get(k, 0) for k in after[0]}
    ratios = [misses["requests_per_s"] / hits["requests_per_s"]]
    for r in range(1, rounds):
        again = [f"online {r} {t}" for t in texts]
        more = asyncio.run(_phase(url, headers, again))
        ratios.append(more["requests_per_s"] / asyncio.run(_phase(
            url, headers, random.sample(again, len(again))))["requests_per_s"])
    return {"clients": CLIENTS, "requests": len(pool), "miss": misses, "hit": hits,
            "ratios": [round(x, 3) for x in ratios],
            "miss_cpu_ms_per_text": _cpu_ms_per_text(before[1], after[1], len(pool)),
            "miss_stage_cpu_ms_per_text": _stages(delta, len(pool)),
            "hit_cpu_ms_per_text": _cpu_ms_per_text(after[1], hit_cpu, len(pool))}


def _cpu_ms_per_text(before: dict[str, float], after: dict[str, float], texts: int
                     ) -> dict[str, float]:
    """Each process's CPU ms a text between two readings (`_cpu_s`)."""
    return {n: round((after[n] - before[n]) * 1000 / texts, 3) for n in after}


def _print(r: dict[str, Any]) -> None:
    bulk, floor, online, job = r["bulk"], r["floor"], r["online"], r["bulk"]["job"]
    cpu, staged = _listed(bulk["cpu_ms_per_text"]), _listed(bulk["stage_cpu_ms_per_text"])
    print(
        f"bench pipeline: hashing encoder (costs nothing), {r['texts']} distinct texts\n"
        f"  bulk (embedq bulk --now --wait, 1 worker): {bulk['texts_per_s']:.0f} texts/s "
        f"({bulk['wall_s']} s); model-busy share {bulk['model_busy_share']}\n"
        f"  storage floor (COPY + one Redis pipeline, one client): "
        f"{floor['texts_per_s']:.0f} texts/s; bulk / floor = {r['bulk_over_floor']}\n"
        f"  of which the job (created to finished): {job['texts_per_s']:.0f} texts/s, "
        f"job / floor = {r['job_over_floor']} (items stored {job['items_stored_s']} s, run "
        f"{job['run_s']} s); the command outside the job (start, exit): {job['outside_s']} s\n"
        f"  CPU ms a text: {cpu}\n"
        f"  of which stages (ms a text): {staged or 'none counted'}\n"
        f"  online, {online['clients']} clients x 1 text: misses "
        f"{online['miss']['requests_per_s']:.0f} req/s (p50 {online['miss']['p50_ms']} ms),"
        f" hits {online['hit']['requests_per_s']:.0f} req/s; misses / hits = "
        f"{r['misses_over_hits']} (median of {len(online['ratios'])} rounds: "
        f"{', '.join(str(x) for x in online['ratios'])})\n"
        f"  misses, CPU ms a text: {_listed(online['miss_cpu_ms_per_text'])}; stages: "
        f"{_listed(online['miss_stage_cpu_ms_per_text'])}\n"
        f"  hits, CPU ms a text: {_listed(online['hit_cpu_ms_per_text'])}"
    )


def _listed(figures: dict[str, Any]) -> str:
    """`name value, ...`, leaving out what was not measured (None)."""
    return ", ".join(f"{k} {v}" for k, v in figures.items() if v is not None)
