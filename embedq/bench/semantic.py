"""`embedq bench semantic --entries N`: the semantic cache's index at size.

Vectors are synthetic (for size) but shaped like sentence embeddings: unit vectors in
topical clusters of about 100, and each query a perturbation of a stored entry (a
paraphrase-like neighbour, cosine about 0.9 to it). Reported, for the index that
`build_index` picks at this size:
  * build time (train + add);
  * lookup p50/p99 of one query (the lookup's search step; embedding excluded), next to
    brute-force exact search on the same data in the same run, as the baseline ratio;
  * recall@1 of the index against exact search, and for a few nprobe values;
  * index bytes per entry, and the ratio to the raw float32 vector bytes.
With --writers or --replica it measures the tables and replicas instead
(semantic_replica.py).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import faiss
import numpy as np

from embedq.bench.stats import percentile
from embedq.config import Settings
from embedq.errors import ConfigError
from embedq.semantic.index import FaissIndex, IndexConfig, build_index, unit_rows

DIMENSION = 384
CLUSTER_SIZE = 100


def synthetic(n: int, seed: int = 0) -> np.ndarray:
    """Unit vectors in clusters: within a cluster cosine ~0.5, across ~0."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(1, n // CLUSTER_SIZE), DIMENSION), dtype=np.float32)
    out = np.empty((n, DIMENSION), dtype=np.float32)
    step = 100_000
    for start in range(0, n, step):
        stop = min(n, start + step)
        labels = rng.integers(0, len(centres), stop - start)
        noise = rng.standard_normal((stop - start, DIMENSION), dtype=np.float32)
        out[start:stop] = unit_rows(centres[labels] + noise)
    return out


def queries_near(data: np.ndarray, count: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    picks = data[rng.integers(0, len(data), count)]
    noise = rng.standard_normal(picks.shape, dtype=np.float32) * 0.5 / np.sqrt(DIMENSION)
    return unit_rows(picks + noise)


def _latencies_ms(search: Any, queries: np.ndarray) -> list[float]:
    out = []
    for q in queries:
        started = time.perf_counter()
        search(q)
        out.append((time.perf_counter() - started) * 1000)
    return out


def bench_semantic(entries: int, queries: int, settings: Settings) -> dict[str, Any]:
    config = IndexConfig(flat_max=settings.semantic.flat_max,
                         ivf_list_size=settings.semantic.ivf_list_size,
                         nprobe=settings.semantic.nprobe, use_gpu=settings.semantic.gpu)
    data = synthetic(entries)
    asked = queries_near(data, queries)
    ids = np.arange(entries, dtype=np.int64)
    started = time.perf_counter()
    index = build_index(ids, data, DIMENSION, config)
    build_s = time.perf_counter() - started
    _, truth = faiss.knn(asked, data, 1, metric=faiss.METRIC_INNER_PRODUCT)
    truth_ids = truth[:, 0]

    def recall() -> float:
        found = [index.search(q, 1)[0][0] for q in asked]
        return float(np.mean(np.asarray(found) == truth_ids))

    lat = _latencies_ms(lambda q: index.search(q, 1), asked)
    exact_lat = _latencies_ms(
        lambda q: faiss.knn(q.reshape(1, -1), data, 1, metric=faiss.METRIC_INNER_PRODUCT),
        asked[: min(len(asked), 200)],
    )
    recall_at_1 = recall()
    sweep: dict[str, dict[str, float]] = {}
    if index.kind == "ivf" and isinstance(index, FaissIndex) and not index.on_gpu:
        ivf = faiss.extract_index_ivf(index.index)
        for nprobe in (8, 16, 24, 32, 48):
            ivf.nprobe = nprobe
            sweep[str(nprobe)] = {"recall_at_1": round(recall(), 4),
                                  "p99_ms": round(percentile(_latencies_ms(
                                      lambda q: index.search(q, 1), asked), 99), 3)}
        ivf.nprobe = config.nprobe
    stored = (len(faiss.serialize_index(index.index)) if isinstance(index, FaissIndex)
              and not index.on_gpu else index.memory_bytes())
    raw = entries * DIMENSION * 4
    return {
        "entries": entries,
        "queries": queries,
        "index_kind": index.kind,
        "nlist": int(faiss.extract_index_ivf(index.index).nlist) if index.kind == "ivf"
        and isinstance(index, FaissIndex) and not index.on_gpu else 0,
        "nprobe": config.nprobe if index.kind == "ivf" else 0,
        "gpu": bool(isinstance(index, FaissIndex) and index.on_gpu),
        "build_s": round(build_s, 2),
        "lookup_p50_ms": round(percentile(lat, 50), 3),
        "lookup_p99_ms": round(percentile(lat, 99), 3),
        "exact_p50_ms": round(percentile(exact_lat, 50), 3),
        "exact_p99_ms": round(percentile(exact_lat, 99), 3),
        "speedup_p50": round(percentile(exact_lat, 50) / max(percentile(lat, 50), 1e-9), 1),
        "recall_at_1": round(recall_at_1, 4),
        "index_bytes": stored,
        "bytes_per_entry": round(stored / entries, 1),
        "raw_vector_bytes_per_entry": DIMENSION * 4,
        "memory_ratio_to_raw": round(stored / raw, 4),
        "nprobe_sweep": sweep,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.file:
        raise ConfigError("bench semantic measures synthetic vectors and reads no texts: "
                          "drop --file (size it with --entries and --queries)")
    if args.writers or args.replica:
        from embedq.bench import semantic_replica

        return semantic_replica.run(args)
    settings = Settings.from_env()
    report = bench_semantic(args.entries, args.queries, settings)
    print(
        f"bench semantic: {report['entries']} entries, {report['index_kind']} index "
        f"(nlist {report['nlist']}, nprobe {report['nprobe']}), built in {report['build_s']} s; "
        f"lookup p50 {report['lookup_p50_ms']} ms, p99 {report['lookup_p99_ms']} ms "
        f"(exact search p50 {report['exact_p50_ms']} ms: {report['speedup_p50']}x); "
        f"recall@1 {report['recall_at_1']}; {report['bytes_per_entry']} bytes/entry "
        f"({report['memory_ratio_to_raw']}x the raw float32 vectors)"
    )
    for nprobe, row in report["nprobe_sweep"].items():
        print(f"  nprobe {nprobe:>3}: recall@1 {row['recall_at_1']}, p99 {row['p99_ms']} ms")
    return report
