"""`embedq bench bulk --via-jobs`: the bulk path end to end against bare encode.

Same run, same texts: (1) SentenceTransformer.encode at its best batch size; (2) `embedq
bulk FILE --now --wait` as a subprocess, timed from start to the job's end (texts read,
stored, chunked, dispatched, encoded and persisted); the ratio of the two rates, and the
peak RSS of the bulk command. On a cluster, (3) online latency of single-text requests
sent open loop at --online-rate a second, idle and then while a second job over the same
lines (new salt, so nothing is cached) runs; that job's rate is reported too (the model
is shared with the online requests), and the worker's peak RSS.

On a cluster it first checks for a live worker serving the configured model (its heartbeat
in the hot store, as /readyz does) and refuses to start without one; each job has a
deadline, so a worker that dies mid-run ends the bench with an error, not a hang.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from embedq.bench.bulk import bare_model, best_raw_rate
from embedq.bench.stats import percentile
from embedq.config import Settings
from embedq.corpus import load_texts
from embedq.errors import Unavailable

# A job's deadline: start-up, then a rate far below any real run's (a few hundred texts/s).
JOB_STARTUP_S = 300.0
JOB_MIN_TEXTS_PER_S = 5.0


def _p99_ms(samples_s: list[float]) -> float:
    return percentile(samples_s, 99) * 1000


def _probe(service: Any, rate: float, stop: threading.Event, out: list[float], tag: str,
           limit: int = 0) -> None:
    """Open loop: one single-text request every 1/rate s, whatever the answers take.
    Latency counts from the scheduled moment, so a stall cannot hide behind requests
    that were never sent."""
    period = 1.0 / rate

    def one(due: float, n: int) -> None:
        service.embed([f"latency probe {tag} {n} {uuid.uuid4().hex[:6]}"])
        out.append(time.perf_counter() - due)

    with ThreadPoolExecutor(32, "embedq-probe") as pool:
        start = time.perf_counter()
        n = 0
        while not stop.is_set() and (not limit or n < limit):
            due = start + n * period
            if stop.wait(max(0.0, due - time.perf_counter())):
                break
            pool.submit(one, due, n)
            n += 1


def _peak_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _sample_peak(proc: subprocess.Popen[str], peaks: list[float]) -> None:
    while proc.poll() is None:
        peaks.append(_peak_rss_mb(proc.pid))
        time.sleep(0.2)


def _write_jsonl(path: Path, texts: list[str]) -> None:
    with path.open("w") as fh:
        for i, text in enumerate(texts):
            fh.write(json.dumps({"id": str(i), "text": text}) + "\n")


def live_workers_serving(settings: Settings) -> tuple[int, int]:
    """(live workers serving the configured model and revision, live workers in all), from
    their heartbeats in the hot store (as /readyz counts them). The one detection every
    bench that needs a cluster worker uses."""
    from embedq.coordination import make_hot_store
    from embedq.encoders import model_identity

    model, revision = model_identity(settings)
    workers = make_hot_store(settings).live_workers()
    serving = sum((w.get("model"), w.get("revision")) == (model, revision)
                  for w in workers.values())
    return serving, len(workers)


def require_live_worker(settings: Settings) -> None:
    """Refuse a cluster run with no live worker for this model: the job would wait forever."""
    from embedq.encoders import model_identity

    serving, live = live_workers_serving(settings)
    if serving:
        return
    model, revision = model_identity(settings)
    others = f" ({live} live for other models)" if live else ""
    raise Unavailable(
        f"bench bulk --via-jobs needs a live worker serving {model}@{revision[:12]} and "
        f"none is running{others}: start `embedq worker` and `embedq beat` with this same "
        "EMBEDQ_* environment, then run the bench again"
    )


def _job_deadline_s(texts: int) -> float:
    return JOB_STARTUP_S + texts / JOB_MIN_TEXTS_PER_S


def _run_bulk(src: Path, env: dict[str, str], timeout_s: float
              ) -> tuple[float, dict[str, Any], float]:
    """`embedq bulk SRC --now --wait` as a subprocess: seconds, final state, peak RSS MB.
    Killed, and the bench ended, if the job has not finished within `timeout_s`."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "embedq.cli", "bulk", str(src), "--now", "--wait", "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    # The child's own high-water mark, sampled while it runs: rusage of children would
    # count the pages it shared with this (model-holding) process between fork and exec.
    peaks = [0.0]
    sampler = threading.Thread(target=_sample_peak, args=(proc, peaks), daemon=True)
    sampler.start()
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise Unavailable(
            f"embedq bulk did not finish within {timeout_s:.0f} s: check that `embedq "
            "worker` and `embedq beat` are running with this environment (`embedq jobs "
            "list` shows the job, `embedq jobs cancel ID` stops it)"
        ) from None
    finally:
        sampler.join()
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"embedq bulk failed (exit {proc.returncode})")
    return dt, json.loads(out), max(peaks)


def bench_bulk_job(n: int, path: str | None, online_rate: float = 10.0) -> dict[str, Any]:
    """Throughput with the job alone, then (on a cluster) online latency with a second
    job of the same size running: idle p99 against p99 during the job."""
    settings = Settings.from_env()
    if not settings.embedded:
        require_live_worker(settings)
    corpus = load_texts(n, path)
    salt = uuid.uuid4().hex[:6]  # fresh texts: nothing cached from an earlier run
    texts = [f"{t} ({salt})" for t in corpus]
    model = bare_model(settings, "bench bulk --via-jobs")
    best_bs, raw_rate = best_raw_rate(model, texts)
    del model

    report: dict[str, Any] = {"texts": n, "unique": len(set(texts)), "raw_batch_size": best_bs,
                              "raw_texts_per_s": round(raw_rate, 1),
                              "mode": "embedded" if settings.embedded else "cluster"}
    with tempfile.TemporaryDirectory(prefix="embedq-bench-jobs-") as tmp:
        src = Path(tmp) / "input.jsonl"
        _write_jsonl(src, texts)
        env = dict(os.environ)
        if settings.embedded:
            env["EMBEDQ_DATA_DIR"] = tmp
        dt, state, peak = _run_bulk(src, env, _job_deadline_s(n))
        report.update({
            "embedq_bulk_texts_per_s": round(n / dt, 1),
            "ratio": round(n / dt / raw_rate, 3),
            "encoded": state["progress"]["encoded"],
            "bulk_command_peak_rss_mb": round(peak, 1),
        })
        if not settings.embedded:
            report.update(_latency_under_bulk(settings, corpus, Path(tmp), env, online_rate))
            # The useful work the machine did meanwhile: the job's texts and the online
            # requests answered during it, over the bare model's batched rate.
            together = report["bulk_with_online_texts_per_s"] + \
                report["online_probes_during_bulk"] / report["bulk_with_online_seconds"]
            report["bulk_plus_online_over_raw"] = round(together / raw_rate, 3)
    print(
        f"bench bulk --via-jobs: {n} texts ({report['unique']} unique); raw "
        f"SentenceTransformer.encode (batch {best_bs}): {raw_rate:.0f} texts/s; embedq bulk "
        f"end to end (persisted, {report['mode']}): {report['embedq_bulk_texts_per_s']:.0f} "
        f"texts/s; ratio {report['ratio']:.3f}; bulk command peak RSS "
        f"{report['bulk_command_peak_rss_mb']:.0f} MB"
        + (f"; worker peak RSS {report['worker_peak_rss_mb']:.0f} MB; online p99 idle "
           f"{report['online_p99_idle_ms']:.1f} ms, during bulk "
           f"{report['online_p99_during_bulk_ms']:.1f} ms (x{report['online_p99_ratio']}, "
           f"{report['online_probes_during_bulk']} probes at {report['online_rate_per_s']:g}/s); "
           "the job meanwhile "
           f"{report['bulk_with_online_texts_per_s']:.0f} texts/s; job + online over raw "
           f"{report['bulk_plus_online_over_raw']:.3f}"
           if "worker_peak_rss_mb" in report else "")
    )
    return report


def _latency_under_bulk(settings: Settings, corpus: list[str], tmp: Path,
                        env: dict[str, str], rate: float) -> dict[str, Any]:
    """Single-text online requests at `rate` a second: idle, then while a fresh job runs."""
    from embedq.service import EmbeddingService

    service = EmbeddingService(settings)
    salt = uuid.uuid4().hex[:6]
    src = tmp / "input-2.jsonl"
    _write_jsonl(src, [f"{t} ({salt})" for t in corpus])
    service.embed(["bench warm-up"])
    idle: list[float] = []
    busy: list[float] = []
    stop = threading.Event()
    _probe(service, rate, stop, idle, "idle", limit=max(200, int(rate * 20)))
    prober = threading.Thread(target=_probe, args=(service, rate, stop, busy, "busy"))
    prober.start()
    try:
        dt, _, _ = _run_bulk(src, env, _job_deadline_s(len(corpus)))
    finally:
        stop.set()
        prober.join()
    workers = service.hot.live_workers()
    return {
        "worker_peak_rss_mb": max(
            (_peak_rss_mb(int(str(w.get("pid", 0)))) for w in workers.values()), default=0),
        "online_p99_idle_ms": round(_p99_ms(idle), 1),
        "online_p99_during_bulk_ms": round(_p99_ms(busy), 1),
        "online_p99_ratio": round(_p99_ms(busy) / max(_p99_ms(idle), 1e-9), 2),
        "online_probes_during_bulk": len(busy),
        "online_rate_per_s": rate,
        "bulk_with_online_texts_per_s": round(len(corpus) / dt, 1),
        "bulk_with_online_seconds": round(dt, 3),
    }
