"""`embedq bench bulk --via-jobs`: the bulk path end to end against bare encode.

Same run, same texts: (1) SentenceTransformer.encode at its best batch size; (2) `embedq
bulk FILE --now --wait` as a subprocess, timed from start to the job's end (texts read,
stored, chunked, dispatched, encoded and persisted); the ratio of the two rates, and the
peak RSS of the bulk command. On a cluster, (3) online latency of single-text requests
sent open loop at --online-rate a second, idle and then while a second job over the same
lines (new salt, so nothing is cached) runs; that job's rate is reported too (the model
is shared with the online requests), and the worker's peak RSS.
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

import numpy as np

from embedq.config import Settings
from embedq.corpus import load_texts


def _p99_ms(samples: list[float]) -> float:
    return float(np.percentile(np.array(samples) * 1000, 99)) if samples else 0.0


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


def _run_bulk(src: Path, env: dict[str, str]) -> tuple[float, dict[str, Any], float]:
    """`embedq bulk SRC --now --wait` as a subprocess: seconds, final state, peak RSS MB."""
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
    out, _ = proc.communicate()
    sampler.join()
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"embedq bulk failed (exit {proc.returncode})")
    return dt, json.loads(out), max(peaks)


def bench_bulk_job(n: int, path: str | None, online_rate: float = 10.0) -> dict[str, Any]:
    """Throughput with the job alone, then (on a cluster) online latency with a second
    job of the same size running: idle p99 against p99 during the job."""
    from embedq.bench import _best_raw_rate, bare_model

    settings = Settings.from_env()
    corpus = load_texts(n, path)
    salt = uuid.uuid4().hex[:6]  # fresh texts: nothing cached from an earlier run
    texts = [f"{t} ({salt})" for t in corpus]
    model = bare_model(settings, "bench bulk --via-jobs")
    best_bs, raw_rate = _best_raw_rate(model, texts)
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
        dt, state, peak = _run_bulk(src, env)
        report.update({
            "embedq_bulk_texts_per_s": round(n / dt, 1),
            "ratio": round(n / dt / raw_rate, 3),
            "encoded": state["progress"]["encoded"],
            "bulk_command_peak_rss_mb": round(peak, 1),
        })
        if not settings.embedded:
            report.update(_latency_under_bulk(settings, corpus, Path(tmp), env, online_rate))
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
           f"{report['bulk_with_online_texts_per_s']:.0f} texts/s"
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
        dt, _, _ = _run_bulk(src, env)
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
    }
