"""Online requests against a running `embedq serve`, with bare-encode baselines from the
same run and, given span files from `scripts/trace_online.py`, a per-request breakdown.

    python scripts/online_profile.py --url http://127.0.0.1:8000 --mode sequential --n 200 \
        --spans api.jsonl worker.jsonl
    python scripts/online_profile.py --url ... --mode threads --threads 10 --n 1000

Texts: `embedq.corpus.load_texts(n, split="heldout")`, salted per run so every request
misses. Baselines: the configured model as a bare SentenceTransformer, one text per
`encode` (median), and all the texts at its best batch size (texts/s). A measuring tool:
nothing in embedq imports it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from embedq.bench.bulk import bare_model, best_raw_rate
from embedq.bench.stats import percentile, proc_cpu_s
from embedq.config import Settings
from embedq.corpus import load_texts


def bare(texts: list[str]) -> tuple[float, float]:
    """(one-text encode median ms, batched texts/s)."""
    model = bare_model(Settings.from_env(), "online_profile")
    for t in texts[:5]:
        model.encode([t], show_progress_bar=False)
    times = []
    for t in texts[:50]:
        t0 = time.perf_counter()
        model.encode([t], show_progress_bar=False)
        times.append((time.perf_counter() - t0) * 1000)
    _, rate = best_raw_rate(model, texts)
    return statistics.median(times), rate


def post(client: httpx.Client, url: str, text: str) -> float:
    t0 = time.perf_counter()
    r = client.post(url + "/v1/embeddings", json={"input": text})
    r.raise_for_status()
    return (time.perf_counter() - t0) * 1000


def sequential(url: str, texts: list[str]) -> list[float]:
    with httpx.Client(timeout=60) as c:
        return [post(c, url, t) for t in texts]


def threads(url: str, texts: list[str], n_threads: int) -> list[float]:
    local = threading.local()
    out: list[float] = []

    def one(text: str) -> None:
        if not hasattr(local, "c"):
            local.c = httpx.Client(timeout=60)
        out.append(post(local.c, url, text))

    with ThreadPoolExecutor(n_threads) as pool:
        list(pool.map(one, texts))
    return out


def read_spans(paths: list[str], t0: float, t1: float) -> list[dict[str, Any]]:
    spans = []
    for p in paths:
        with open(p) as f:
            for line in f:
                s = json.loads(line)
                if t0 <= s["t0"] <= t1:
                    spans.append(s)
    return spans


def breakdown(spans: list[dict[str, Any]], requests: int) -> dict[str, dict[str, float]]:
    """Per span name: calls, CPU ms and wall ms per request; plus derived gaps per text."""
    rows: dict[str, dict[str, float]] = defaultdict(lambda: {"calls": 0, "cpu": 0.0, "wall": 0.0})
    for s in spans:
        r = rows[s["span"]]
        r["calls"] += 1
        r["cpu"] += (s["cpu"]) * 1000
        r["wall"] += (s["t1"] - s["t0"]) * 1000
    out = {k: {"calls": v["calls"], "cpu_ms": v["cpu"] / requests, "wall_ms": v["wall"] / requests}
           for k, v in rows.items()}
    # Gaps between processes/threads, per fingerprint, averaged over fingerprints.
    first: dict[tuple[str, str], float] = {}
    last: dict[tuple[str, str], float] = {}
    for s in spans:
        for fp in s["fps"]:
            first.setdefault((s["span"], fp), s["t0"])
            last[(s["span"], fp)] = s["t1"]
    gaps = {
        "gap.publish_to_task": (("broker.publish", "t1"), ("worker.task", "t0")),
        "gap.submit_to_encode": (("worker.batcher_submit", "t1"), ("worker.encode_step", "t0")),
        "gap.encode_to_write": (("worker.encode_step", "t1"), ("worker.write_step", "t0")),
        "gap.redis_write_to_wake": (("redis.record_batch", "t1"), ("api.wake", "t0")),
        "gap.wake_to_answer": (("api.wake", "t0"), ("api.await", "t1")),
    }
    fps = {fp for s in spans for fp in s["fps"]}
    for name, ((a, ea), (b, eb)) in gaps.items():
        vals = []
        for fp in fps:
            ta = (last if ea == "t1" else first).get((a, fp))
            tb = (last if eb == "t1" else first).get((b, fp))
            if ta is not None and tb is not None:
                vals.append((tb - ta) * 1000)
        if vals:
            out[name] = {"calls": len(vals), "cpu_ms": 0.0, "wall_ms": statistics.mean(vals)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--mode", choices=["sequential", "threads"], required=True)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--threads", type=int, default=10)
    ap.add_argument("--spans", nargs="*", default=[])
    ap.add_argument("--pids", nargs="*", type=int, default=[], help="API and worker pids")
    ap.add_argument("--no-bare", action="store_true")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    run = uuid.uuid4().hex[:8]
    texts = [f"{t} [{run}-{i}]" for i, t in enumerate(load_texts(args.n, split="heldout"))]
    warm = [f"warm-up {run} {i}" for i in range(20)]
    sequential(args.url, warm)
    cpu0 = {p: proc_cpu_s([p]) or 0.0 for p in args.pids}
    client0 = time.process_time()
    t0 = time.time()
    if args.mode == "sequential":
        lat = sequential(args.url, texts)
    else:
        lat = threads(args.url, texts, args.threads)
    t1 = time.time()
    cpu = {p: ((proc_cpu_s([p]) or 0.0) - c) * 1000 / len(texts) for p, c in cpu0.items()}
    report: dict[str, Any] = {
        "mode": args.mode, "n": len(texts), "texts_per_s": len(texts) / (t1 - t0),
        "p50_ms": percentile(lat, 50), "p99_ms": percentile(lat, 99),
        "mean_ms": statistics.mean(lat), "process_cpu_ms_per_request": cpu,
        "client_cpu_ms_per_request": (time.process_time() - client0) * 1000 / len(texts),
    }
    if args.spans:
        time.sleep(0.5)
        report["spans"] = breakdown(read_spans(args.spans, t0, t1 + 0.5), len(texts))
    if not args.no_bare:
        one_ms, rate = bare(texts)
        report["bare_one_text_ms"] = one_ms
        report["bare_batched_texts_per_s"] = rate
        report["ratio_throughput"] = report["texts_per_s"] / rate
        report["ratio_latency_p50"] = report["p50_ms"] / one_ms
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
