"""The pgvector engine (EMBEDQ_SEMANTIC_INDEX=pgvector): Postgres finds the candidates.

The vectors live next to their entries, in an `embedding vector(D)` column of
`semantic_entries`, under one HNSW index (cosine). A lookup is one query: the namespace's
(and model space's) nearest `k` rows by cosine distance, the HNSW scan filtered by
namespace (pgvector's iterative scan, in strict order, keeps going past other namespaces'
rows until it has `k`). No process keeps a copy, nothing follows the change log, and a
write is visible to every process once committed.

Writes go through the store unchanged (the `vector` bytes stay the source of truth); the
column is filled from them by `catch_up`, which the cache calls after each of its own
writes: it fills every row of its space still without an embedding (a partial index keeps
those few found at once), so a process that died between the two commits leaves nothing
behind for long. `start` fills them too.

The column and indexes are made by `embedq cache index-setup` (`setup`), not by a
migration: the column's dimensions are the model's, which a migration cannot know, and a
Postgres without pgvector (and SQLite) keeps its schema untouched for the FAISS default.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from embedq.errors import ConfigError, EmbedqError
from embedq.models import Database, map_db_errors
from embedq.models.engine import make_engine
from embedq.semantic.engine import PGVECTOR
from embedq.semantic.index import Hit, Matrix
from embedq.semantic.store import SemanticStore, utcnow

log = logging.getLogger("embedq.semantic")

COLUMN = "embedding"
HNSW_INDEX = "ix_semantic_entries_embedding"
PENDING_INDEX = "ix_semantic_entries_unembedded"
MIN_VERSION = (0, 8, 0)  # hnsw.iterative_scan: filtered HNSW scans that still find k
FILL_BATCH = 10_000
COPY_MIN_ROWS = 64
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags, no extension
COPY_TRAILER = b"\xff\xff"
SETUP = "embedq cache index-setup"
INSTALL = (
    "install pgvector on the Postgres server (docker-compose.yml's pgvector/pgvector:pg16 "
    "image, the postgresql-NN-pgvector package from apt.postgresql.org, or your "
    "provider's `vector` extension)"
)

# The driver's own statement (SQLAlchemy's compile and execute cost more than the scan at
# small sizes); the query vector goes as a float8 array, in binary, not as text.
_SEARCH = (
    f"SELECT id, 1 - ({COLUMN} <=> CAST(%(q)s AS vector)) FROM semantic_entries "
    f"WHERE namespace = %(ns)s AND space = %(space)s AND {COLUMN} IS NOT NULL "
    f"ORDER BY {COLUMN} <=> CAST(%(q)s AS vector) LIMIT %(k)s"
)
_PENDING = text(
    f"SELECT id, vector FROM semantic_entries WHERE {COLUMN} IS NULL AND space = :space "
    "ORDER BY id LIMIT :n"
)
_FILL = text(
    f"UPDATE semantic_entries AS e SET {COLUMN} = CAST(v.emb AS vector) FROM "
    "(SELECT unnest(CAST(:ids AS bigint[])) AS id, unnest(CAST(:embs AS text[])) AS emb) v "
    f"WHERE e.id = v.id AND e.{COLUMN} IS NULL"
)


def literal(vector: Matrix) -> str:
    """pgvector's text form of one vector; float32 values round-trip exactly."""
    return "[" + ",".join(map(str, np.asarray(vector, dtype=np.float32).ravel().tolist())) + "]"


def _version(raw: str) -> tuple[int, ...]:
    return tuple(int(part) for part in raw.split("-")[0].split(".") if part.isdigit())


def _extension(s: Session) -> str | None:
    found = s.scalar(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'"))
    return None if found is None else str(found)


def _column_dimension(s: Session) -> int | None:
    """The embedding column's dimensions; None when there is no column."""
    found = s.scalar(text(
        "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'semantic_entries'::regclass "
        "AND attname = :c AND NOT attisdropped"), {"c": COLUMN})
    return None if found is None else int(found)


def _check_version(version: str) -> None:
    if _version(version) < MIN_VERSION:
        raise ConfigError(
            f"pgvector {version} is installed; EMBEDQ_SEMANTIC_INDEX=pgvector needs 0.8.0 or "
            "later (filtered HNSW scans): install a newer pgvector on the server and run "
            "ALTER EXTENSION vector UPDATE")


def _require_postgres(db: Database) -> None:
    if db.dialect != "postgresql":
        raise ConfigError(
            "EMBEDQ_SEMANTIC_INDEX=pgvector keeps the vectors in Postgres: set "
            "EMBEDQ_DATABASE_URL to a postgresql:// database with pgvector, or use "
            "EMBEDQ_SEMANTIC_INDEX=faiss")


def _create_extension(s: Session) -> None:
    available = s.scalar(text(
        "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"))
    if available is None:
        raise ConfigError(f"this Postgres server has no pgvector: {INSTALL}, then run "
                          f"`{SETUP}` again (or use EMBEDQ_SEMANTIC_INDEX=faiss)")
    try:
        with s.begin_nested():
            s.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
    except DBAPIError as exc:
        raise ConfigError(
            f"could not create the vector extension ({exc.orig}): have a role allowed to "
            "(a superuser, or the database owner where the provider trusts the extension) "
            f"run CREATE EXTENSION vector in this database, then run `{SETUP}` again"
        ) from exc


def setup(db: Database, space: str, dimension: int, memory_mb: int = 0) -> dict[str, Any]:
    """Make what the engine needs, idempotently: the extension (when the role may), the
    `embedding vector(dimension)` column, the pending rows' index, the embeddings of the
    rows of `space` already stored, and the HNSW index (built last: faster on full rows).
    ConfigError, saying what to do, when the server cannot."""
    version = prepare(db, dimension)
    filled = fill_pending(db, space)
    index_bytes = build_hnsw(db, memory_mb)
    return {"index": PGVECTOR, "pgvector": version, "dimension": dimension,
            "filled": filled, "hnsw_index_bytes": index_bytes}


def prepare(db: Database, dimension: int) -> str:
    """The extension, the column and the pending rows' index; returns pgvector's version."""
    _require_postgres(db)
    with db.session() as s:
        if _extension(s) is None:
            _create_extension(s)
        version = _extension(s) or ""
        _check_version(version)
        existing = _column_dimension(s)
        if existing is not None and existing != dimension:
            raise ConfigError(
                f"semantic_entries.{COLUMN} holds {existing}-dimension vectors and this "
                f"model gives {dimension}: one model space per column; drop it (ALTER TABLE "
                f"semantic_entries DROP COLUMN {COLUMN}) and run `{SETUP}` again")
        s.execute(text(f"ALTER TABLE semantic_entries ADD COLUMN IF NOT EXISTS {COLUMN} "
                       f"vector({int(dimension)})"))
        s.execute(text(f"CREATE INDEX IF NOT EXISTS {PENDING_INDEX} ON semantic_entries "
                       f"(space, id) WHERE {COLUMN} IS NULL"))
    return version


def build_hnsw(db: Database, memory_mb: int = 0) -> int:
    """The HNSW index over the column, unless it exists; returns its bytes. Writes to the
    table wait while it builds (minutes at a million rows: see docs/semantic-cache.md).
    `memory_mb` (EMBEDQ_SEMANTIC_INDEX_BUILD_MEMORY_MB; 0: the server's own
    maintenance_work_mem) is the build's graph memory: a graph that outgrows it is built on
    in the index's pages, several times slower, and pgvector's notice says so (logged)."""
    # The build outlasts a request's timeouts at size: a link without them, as migrations.
    engine = make_engine(db.url)
    try:
        with map_db_errors(), engine.begin() as conn:
            driver: Any = conn.connection.driver_connection
            if hasattr(driver, "add_notice_handler"):
                driver.add_notice_handler(_build_notice)
            if memory_mb:
                conn.execute(text("SELECT set_config('maintenance_work_mem', :m, true)"),
                             {"m": f"{int(memory_mb)}MB"})
            conn.execute(text(f"CREATE INDEX IF NOT EXISTS {HNSW_INDEX} ON semantic_entries "
                              f"USING hnsw ({COLUMN} vector_cosine_ops)"))
            return int(conn.scalar(text("SELECT pg_relation_size(CAST(:i AS regclass))"),
                                   {"i": HNSW_INDEX}) or 0)
    finally:
        engine.dispose()


def _build_notice(diagnostic: Any) -> None:
    message = str(getattr(diagnostic, "message_primary", "") or "")
    if "maintenance_work_mem" in message:
        log.warning("pgvector: %s; the build goes on several times slower: give it more "
                    "with EMBEDQ_SEMANTIC_INDEX_BUILD_MEMORY_MB (about 2.5 KB an entry at "
                    "384 dimensions) and run `%s` again on a fresh index", message, SETUP)


def copy_stream(ids: npt.NDArray[np.int64], vectors: Matrix,
                blobs: bool = False) -> bytes:
    """Rows (id bigint, embedding vector[, the float32 little-endian bytes as bytea]) in
    COPY's binary format, built by numpy (no Python work per number)."""
    dim = vectors.shape[1]
    fields = [("fields", ">i2"), ("id_len", ">i4"), ("id", ">i8"), ("v_len", ">i4"),
              ("dim", ">i2"), ("unused", ">i2"), ("v", ">f4", (dim,))]
    if blobs:
        fields += [("b_len", ">i4"), ("b", "<f4", (dim,))]
    out = np.zeros(len(ids), dtype=np.dtype(fields))
    out["fields"], out["id_len"], out["id"] = 3 if blobs else 2, 8, ids
    out["v_len"], out["dim"], out["v"] = 4 + 4 * dim, dim, vectors
    if blobs:
        out["b_len"], out["b"] = 4 * dim, vectors
    return COPY_HEADER + out.tobytes() + COPY_TRAILER


def _fill_by_copy(s: Session, ids: list[int], blobs: list[bytes]) -> None:
    raw = s.connection().connection.driver_connection
    assert raw is not None
    raw.execute("CREATE TEMP TABLE IF NOT EXISTS embedq_fill (id bigint, embedding vector) "
                "ON COMMIT DELETE ROWS")
    vectors = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), -1)
    with raw.cursor().copy("COPY embedq_fill FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(copy_stream(np.asarray(ids, dtype=np.int64), vectors))
    raw.execute(f"UPDATE semantic_entries AS e SET {COLUMN} = f.embedding FROM embedq_fill f "
                f"WHERE e.id = f.id AND e.{COLUMN} IS NULL")


def fill_pending(db: Database, space: str) -> int:
    """Give every row of `space` without an embedding its own; return how many. A few
    rows (a put's) go as text in one UPDATE; more by binary COPY (~10x the rows a second)."""
    total = 0
    while True:
        with db.session() as s:
            rows = s.execute(_PENDING, {"space": space, "n": FILL_BATCH}).all()
            if not rows:
                return total
            ids = [int(r.id) for r in rows]
            if len(rows) >= COPY_MIN_ROWS:
                _fill_by_copy(s, ids, [bytes(r.vector) for r in rows])
            else:
                embs = [literal(np.frombuffer(r.vector, dtype="<f4")) for r in rows]
                s.execute(_FILL, {"ids": ids, "embs": embs})
            total += len(rows)
        if len(rows) < FILL_BATCH:
            return total


class PgvectorSearch:
    """`CandidateSearch` (engine.py) on the table's HNSW index; upkeep (the expiry sweep,
    the error budget's sweeps, change-log pruning) on a thread every `sweep_interval_s`."""

    loaded_from = "postgres"

    def __init__(self, store: SemanticStore, space: str, *, ef_search: int,
                 sweep_interval_s: float, change_retention_s: float,
                 sweeps: Sequence[Callable[[datetime], object]] = ()) -> None:
        self.store = store
        self.db = store.db
        self.space = space
        self.ef_search = ef_search
        self.sweep_interval_s = sweep_interval_s
        self.change_retention_s = change_retention_s
        self.sweeps = tuple(sweeps)
        self.dimension = 0
        # Searches run on an engine of their own: one statement each in autocommit (no
        # BEGIN/COMMIT round trips), the HNSW scan's settings fixed per connection.
        self.engine = make_engine(
            self.db.url, self.db.timeouts, pre_ping=False, autocommit=True,
            server={"hnsw.ef_search": str(ef_search), "hnsw.iterative_scan": "strict_order"})
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def check(self) -> None:
        """ConfigError, saying what to do, unless the server has pgvector, the column
        and the HNSW index."""
        _require_postgres(self.db)
        with self.db.session() as s:
            version = _extension(s)
            if version is None:
                available = s.scalar(text(
                    "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"))
                raise ConfigError(
                    "EMBEDQ_SEMANTIC_INDEX=pgvector: this database has no vector extension: "
                    + (f"run `{SETUP}`" if available else f"{INSTALL}, then run `{SETUP}`")
                    + " (or use EMBEDQ_SEMANTIC_INDEX=faiss)")
            _check_version(version)
            dimension = _column_dimension(s)
            indexed = s.scalar(text("SELECT 1 FROM pg_indexes WHERE indexname = :i"),
                               {"i": HNSW_INDEX})
            if dimension is None or indexed is None:
                raise ConfigError(
                    f"EMBEDQ_SEMANTIC_INDEX=pgvector: semantic_entries has no {COLUMN} "
                    f"column or HNSW index yet: run `{SETUP}` once (it adds them and "
                    "embeds the entries already stored)")
        self.dimension = dimension

    def start(self) -> None:
        self.check()
        self.catch_up()
        self._thread = threading.Thread(target=self._run, name="embedq-semantic-upkeep",
                                        daemon=True)
        self._thread.start()

    def close(self, save: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.engine.dispose()

    def search(self, namespace: str, vector: Matrix, k: int) -> list[Hit]:
        if not self.dimension:
            self.check()
        if vector.size != self.dimension:
            raise ConfigError(
                f"semantic_entries.{COLUMN} holds {self.dimension}-dimension vectors and "
                f"this model gives {vector.size}: drop the column (ALTER TABLE "
                f"semantic_entries DROP COLUMN {COLUMN}) and run `{SETUP}` for this model")
        params = {"q": np.asarray(vector, dtype=np.float32).ravel().tolist(),
                  "ns": namespace, "space": self.space, "k": k}
        with map_db_errors():
            try:
                rows = self._search(params)
            except DBAPIError as exc:  # a pooled connection the server dropped: once more
                if not exc.connection_invalidated:
                    raise
                rows = self._search(params)
        return [(int(entry_id), float(score)) for entry_id, score in rows]

    def _search(self, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        with self.engine.connect() as conn:
            return [tuple(r) for r in conn.exec_driver_sql(_SEARCH, params)]

    def catch_up(self) -> int:
        return fill_pending(self.db, self.space)

    def describe(self, namespace: str) -> dict[str, object]:
        with self.db.session() as s:
            stored = s.scalar(text(
                f"SELECT count(*) FROM semantic_entries WHERE namespace = :ns AND "
                f"space = :space AND {COLUMN} IS NOT NULL"),
                {"ns": namespace, "space": self.space}) or 0
            server_bytes = s.scalar(text("SELECT pg_relation_size(CAST(:i AS regclass))"),
                                    {"i": HNSW_INDEX}) or 0
        return {"index_kind": PGVECTOR, "index_vectors": int(stored), "index_bytes": 0,
                "server_index_bytes": int(server_bytes), "loaded_from": self.loaded_from}

    def memory(self) -> dict[str, Any]:
        """Nothing: the vectors and their index live in Postgres (`describe` sizes them)."""
        return {"namespaces": 0, "entries": 0, "bytes": 0, "budget_bytes": 0, "loads": 0,
                "evictions": 0, "loads_from": {}, "load_seconds": {}}

    def _run(self) -> None:
        while not self._stop.wait(self.sweep_interval_s):
            try:
                self.store.sweep_expired()
                for sweep in self.sweeps:
                    sweep(utcnow())
                self.store.prune_changes(self.change_retention_s)
                self.catch_up()
            except EmbedqError as exc:
                log.warning("semantic upkeep: %s (retrying)", exc)
            except Exception:
                log.exception("semantic upkeep failed (retrying)")
