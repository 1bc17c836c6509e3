"""`embedq bench pipeline --vector-writes`: the table `COPY_MIN_ROWS` was chosen from.

On the EMBEDQ_DATABASE_URL Postgres, batches of new vectors of each size go in by one
multi-row INSERT and by COPY (`PostgresVectors.put_many` with its threshold under and over
the size), alternating, `ROUNDS` times each; it prints the wall time, the client's CPU
(the worker's interpreter, in the pipeline) and Postgres's CPU, each a row, the medians.
The rows are random fingerprints with a 384-float vector: what is written, not the
corpus, decides the cost; they are deleted on the way out.
"""

from __future__ import annotations

import statistics
import time
import uuid
from typing import Any

import numpy as np

import embedq.models.vectors as vectors
from embedq.bench.pipeline import named_cpu_s
from embedq.config import Settings
from embedq.errors import ConfigError
from embedq.models.engine import normalize_url

MODEL = "embedq-bench-vector-writes"  # the rows it writes, deleted on the way out
SIZES = (4, 8, 16, 24, 32, 48, 64, 128, 256)
ROWS = 4000  # per size, way and round
ROUNDS = 3


def run(settings: Settings) -> dict[str, Any]:
    url = normalize_url(settings.resolved_database_url)
    if not url.startswith("postgresql"):
        raise ConfigError("bench pipeline --vector-writes weighs Postgres's INSERT against "
                          "its COPY: point EMBEDQ_DATABASE_URL at a Postgres")
    store = vectors.PostgresVectors(url)
    blob = np.random.default_rng(0).random(384, dtype=np.float32).tobytes()
    table: list[dict[str, Any]] = []
    try:
        for size in SIZES:
            ways: dict[str, list[tuple[float, float, float]]] = {"insert": [], "copy": []}
            for _ in range(ROUNDS):
                for way in ways:
                    store.copy_min_rows = size + 1 if way == "insert" else size
                    ways[way].append(_write(store, size, blob))
            table.append({"rows": size, **{
                f"{way}_{what}": round(statistics.median(r[k] for r in runs), 1)
                for way, runs in ways.items()
                for k, what in enumerate(("wall_us", "client_us", "postgres_us"))}})
    finally:
        store.run(lambda conn: conn.exec_driver_sql("DELETE FROM embeddings WHERE model = %s",
                                                    (MODEL,)))
        store.close()
    report = {"rows_per_size": ROWS, "rounds": ROUNDS, "copy_min_rows": vectors.COPY_MIN_ROWS,
              "table": table}
    print(show(report))
    return report


def _write(store: vectors.PostgresVectors, size: int, blob: bytes
           ) -> tuple[float, float, float]:
    """us a row: wall, this process's CPU, Postgres's CPU (all its processes)."""
    rows = [vectors.StoredVector(uuid.uuid4().hex * 2, MODEL, "r", 384, blob)
            for _ in range(ROWS - ROWS % size)]
    began, cpu, server = time.perf_counter(), time.process_time(), named_cpu_s("postgres")
    for i in range(0, len(rows), size):
        store.put_many(rows[i:i + size])
    per = 1e6 / len(rows)
    return ((time.perf_counter() - began) * per, (time.process_time() - cpu) * per,
            (named_cpu_s("postgres") - server) * per)


def show(report: dict[str, Any]) -> str:
    lines = [f"bench pipeline --vector-writes: new vectors by one multi-row INSERT and by "
             f"COPY, {report['rows_per_size']} rows a size and way, median of "
             f"{report['rounds']} alternating rounds; us a row",
             f"  {'rows':>5} | {'INSERT wall':>11} {'client':>7} {'postgres':>8} | "
             f"{'COPY wall':>9} {'client':>7} {'postgres':>8}"]
    for r in report["table"]:
        lines.append(f"  {r['rows']:>5} | {r['insert_wall_us']:>11} {r['insert_client_us']:>7}"
                     f" {r['insert_postgres_us']:>8} | {r['copy_wall_us']:>9} "
                     f"{r['copy_client_us']:>7} {r['copy_postgres_us']:>8}")
    lines.append(f"  batches of {report['copy_min_rows']} rows or more go in by COPY "
                 "(embedq.models.vectors.COPY_MIN_ROWS)")
    return "\n".join(lines)
