"""`embedq bench bulk --via-jobs`: the bulk path end to end against bare encode.

Same run, same texts: (1) SentenceTransformer.encode at its best batch size; (2) `embedq
bulk FILE --now --wait` as a subprocess, timed from start to the job's end (texts read,
stored, chunked, dispatched, encoded and persisted); the ratio of the two rates. On a
cluster it also measures online latency (single-text requests) idle and while the job
runs, and the peak RSS of the bulk command and of the worker.
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
from pathlib import Path
from typing import Any

import numpy as np

from embedq.config import Settings
from embedq.corpus import load_texts


def _p99_ms(samples: list[float]) -> float:
    return float(np.percentile(np.array(samples) * 1000, 99)) if samples else 0.0


def _probe(service: Any, stop: threading.Event, out: list[float], tag: str,
           limit: int = 0) -> None:
    n = 0
    while not stop.is_set() and (not limit or n < limit):
        t0 = time.perf_counter()
        service.embed([f"latency probe {tag} {n} {uuid.uuid4().hex[:6]}"])
        out.append(time.perf_counter() - t0)
        n += 1
        time.sleep(0.02)


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


def bench_bulk_job(n: int, path: str | None) -> dict[str, Any]:
    from embedq.bench import _best_raw_rate
    from embedq.encoders import load_encoder
    from embedq.service import EmbeddingService

    settings = Settings.from_env()
    salt = uuid.uuid4().hex[:6]  # fresh texts: nothing cached from an earlier run
    texts = [f"{t} ({salt})" for t in load_texts(n, path)]
    encoder = load_encoder(settings)
    encoder.warm_up()
    model = getattr(encoder, "model", None)
    if model is None:
        raise SystemExit("bench bulk --via-jobs needs EMBEDQ_ENCODER=sentence-transformers")
    best_bs, raw_rate = _best_raw_rate(model, texts)
    del encoder, model

    report: dict[str, Any] = {"texts": n, "unique": len(set(texts)), "raw_batch_size": best_bs,
                              "raw_texts_per_s": round(raw_rate, 1)}
    with tempfile.TemporaryDirectory(prefix="embedq-bench-jobs-") as tmp:
        src = Path(tmp) / "input.jsonl"
        with src.open("w") as fh:
            for i, text in enumerate(texts):
                fh.write(json.dumps({"id": str(i), "text": text}) + "\n")
        env = dict(os.environ)
        if settings.embedded:
            env["EMBEDQ_DATA_DIR"] = tmp
        service = None if settings.embedded else EmbeddingService(settings)
        idle: list[float] = []
        busy: list[float] = []
        stop = threading.Event()
        if service is not None:
            service.embed(["bench warm-up"])
            _probe(service, stop, idle, "idle", limit=200)
            prober = threading.Thread(target=_probe, args=(service, stop, busy, "busy"))
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "embedq.cli", "bulk", str(src), "--now", "--wait",
             "--json"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        if service is not None:
            prober.start()
        # The child's own high-water mark, sampled while it runs: rusage of children would
        # count the pages it shared with this (model-holding) process between fork and exec.
        peaks = [0.0]
        sampler = threading.Thread(target=_sample_peak, args=(proc, peaks), daemon=True)
        sampler.start()
        out, _ = proc.communicate()
        sampler.join()
        dt = time.perf_counter() - t0
        stop.set()
        if service is not None:
            prober.join()
        if proc.returncode != 0:
            raise SystemExit(f"embedq bulk failed (exit {proc.returncode})")
        state = json.loads(out)
        rate = n / dt
        report.update({
            "embedq_bulk_texts_per_s": round(rate, 1),
            "ratio": round(rate / raw_rate, 3),
            "encoded": state["progress"]["encoded"],
            "bulk_command_peak_rss_mb": round(max(peaks), 1),
            "mode": "embedded" if settings.embedded else "cluster",
        })
        if service is not None:
            workers = service.hot.live_workers()
            report["worker_peak_rss_mb"] = max(
                (_peak_rss_mb(int(str(w.get("pid", 0)))) for w in workers.values()), default=0)
            report.update({
                "online_p99_idle_ms": round(_p99_ms(idle), 1),
                "online_p99_during_bulk_ms": round(_p99_ms(busy), 1),
                "online_p99_ratio": round(_p99_ms(busy) / max(_p99_ms(idle), 1e-9), 2),
                "online_probes_during_bulk": len(busy),
            })
    print(
        f"bench bulk --via-jobs: {n} texts ({report['unique']} unique); raw "
        f"SentenceTransformer.encode (batch {best_bs}): {raw_rate:.0f} texts/s; embedq bulk "
        f"end to end (persisted, {report['mode']}): {report['embedq_bulk_texts_per_s']:.0f} "
        f"texts/s; ratio {report['ratio']:.3f}; bulk command peak RSS "
        f"{report['bulk_command_peak_rss_mb']:.0f} MB"
        + (f"; worker peak RSS {report['worker_peak_rss_mb']:.0f} MB; online p99 idle "
           f"{report['online_p99_idle_ms']:.1f} ms, during bulk "
           f"{report['online_p99_during_bulk_ms']:.1f} ms (x{report['online_p99_ratio']})"
           if "worker_peak_rss_mb" in report else "")
    )
    return report
