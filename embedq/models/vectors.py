"""Vector rows: the durable store of finished vectors, one row per fingerprint.

`VectorStore` is the contract; `PostgresVectors` (every cluster) and `SQLiteVectors`
(embedded mode) implement it, and one contract test runs on both
(tests/integration/test_vector_store.py):

- `get_many(fps)`: the stored vectors among `fps`, one query per READ_CHUNK fingerprints;
- `put_many(rows)`: the batch's new rows in one transaction, the stored ones left as they
  are (on Postgres a COPY, or one `INSERT .. ON CONFLICT DO NOTHING`; on SQLite that
  INSERT as one prepared statement run for each row), returning
  how many rows were new. A duplicate execution is harmless: the primary key on the
  fingerprint is the real fence against computing a text twice;
- vectors are stored as little-endian float32 bytes (`to_bytes`), never pickled.

On Postgres each call is one statement in autocommit on an engine of its own: no BEGIN
and COMMIT round trips (one statement is atomic on its own), no ping before each checkout
(a statement that finds its pooled connection dropped is tried once more on a new one),
and, unless `sync_commit`, no wait for the WAL flush (vectors are a cache the model can
compute again; a later synchronous commit, such as a job's chunk marked done, flushes the
WAL through them, so it never survives a crash that they do not).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import psycopg
from sqlalchemy import Connection, func, select
from sqlalchemy.exc import DBAPIError

from embedq.models.embedding import Embedding
from embedq.models.engine import Database, DbTimeouts, copy_rows, make_engine, map_db_errors

T = TypeVar("T")

READ_CHUNK = 5000
COPY_MIN_ROWS = 24  # from here by COPY: `embedq bench pipeline --vector-writes` prints why
_STAGE_TABLE = "embedq_vectors_in"
_COLUMNS = "embeddings (fingerprint, model, revision, dimensions, dtype, vector)"
_TYPES = ["text", "text", "text", "int4", "text", "bytea"]
PG_SELECT = "SELECT fingerprint, vector FROM embeddings WHERE fingerprint = ANY(%s)"
PG_SELECT_JOINED = ("SELECT fingerprint, vector FROM embeddings "
                    "WHERE fingerprint = ANY(string_to_array(%s, ','))")
_SQLITE_SELECT = "SELECT fingerprint, vector FROM embeddings WHERE fingerprint IN ({marks})"
_SQLITE_INSERT = (f"INSERT INTO {_COLUMNS} VALUES (?, ?, ?, ?, ?, ?) "
                  "ON CONFLICT (fingerprint) DO NOTHING")
_PG_INSERT = f"INSERT INTO {_COLUMNS} VALUES {{values}} ON CONFLICT (fingerprint) DO NOTHING"


def to_bytes(vector: npt.NDArray[np.floating]) -> bytes:
    """float32 little-endian bytes: the only stored form of a vector (never pickle)."""
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def from_bytes(blob: bytes) -> npt.NDArray[np.float32]:
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


@dataclass(frozen=True)
class StoredVector:
    fingerprint: str
    model: str
    revision: str
    dimensions: int
    vector: bytes
    dtype: str = "float32"

    def row(self) -> tuple[str, str, str, int, str, bytes]:
        """Its values in the column order every INSERT and COPY of this module uses."""
        return (self.fingerprint, self.model, self.revision, self.dimensions, self.dtype,
                self.vector)


class VectorStore(ABC):
    """The durable store of vectors (see the module docstring for the contract)."""

    @abstractmethod
    def get_many(self, fps: list[str]) -> dict[str, bytes]:
        """fingerprint -> vector bytes, for those of `fps` that are stored."""

    @abstractmethod
    def put_many(self, rows: list[StoredVector]) -> int:
        """Insert the rows whose fingerprint is new; return how many were new."""

    @abstractmethod
    def count(self) -> int:
        """Rows stored."""

    def close(self) -> None:  # noqa: B027 - a store without links of its own
        """Release the store's own connections."""


class PostgresVectors(VectorStore):
    def __init__(self, url: str, timeouts: DbTimeouts | None = None, *,
                 sync_commit: bool = False) -> None:
        self.engine = make_engine(
            url, timeouts or DbTimeouts(), pre_ping=False, autocommit=True,
            server=None if sync_commit else {"synchronous_commit": "off"})
        self.copy_min_rows = COPY_MIN_ROWS

    def run(self, statement: Callable[[Connection], T]) -> T:
        """`statement(connection)` in autocommit. A pooled connection the database dropped
        (it restarted since) is found by the statement itself, not by a ping first: the
        pool is then invalidated and `statement` tried once more on a new connection, so
        it must be safe to repeat (a lookup, an insert of new rows only)."""
        with map_db_errors():
            try:
                return self._on_connection(statement)
            except DBAPIError as exc:
                if not exc.connection_invalidated:
                    raise
            return self._on_connection(statement)

    def _on_connection(self, statement: Callable[[Connection], T]) -> T:
        with self.engine.connect() as conn:
            return statement(conn)

    def get_many(self, fps: list[str]) -> dict[str, bytes]:
        if not fps:
            return {}

        def lookup(conn: Connection) -> dict[str, bytes]:
            found: dict[str, bytes] = {}
            for i in range(0, len(fps), READ_CHUNK):
                # The driver's own statement, not a compiled construct: a third of a
                # lookup's client CPU went to SQLAlchemy's execution machinery. The
                # fingerprints go as one comma-joined text the server splits: dumping
                # them as an array cost the client 1.6 us a fingerprint, the text 0.3.
                part = fps[i:i + READ_CHUNK]
                joined = ",".join(part)
                rows = conn.exec_driver_sql(PG_SELECT_JOINED, (joined,)) \
                    if joined.count(",") == len(part) - 1 \
                    else conn.exec_driver_sql(PG_SELECT, (part,))  # a comma in one
                found.update({fp: bytes(vec) for fp, vec in rows})
            return found

        return self.run(lookup)

    def put_many(self, rows: list[StoredVector]) -> int:
        """A batch of COPY_MIN_ROWS rows or more goes in by binary COPY (`_copy_in`), a
        smaller one by one multi-row INSERT (where each costs less: the table `embedq bench
        pipeline --vector-writes` prints). Either way in fingerprint order: two writers racing over
        the same new rows (two executions past their claims) then wait for each other in
        one order, where in their batches' own orders each could hold a row the other
        waits for, and Postgres ended one of them as a deadlock."""
        if not rows:
            return 0
        rows = sorted(rows, key=attrgetter("fingerprint"))
        if len(rows) >= self.copy_min_rows:
            return self.run(lambda conn: _copy_in(conn, rows))
        params = tuple(v for r in rows for v in r.row())
        sql = _PG_INSERT.format(values=",".join(["(%s,%s,%s,%s,%s,%s)"] * len(rows)))
        result = self.run(lambda conn: conn.exec_driver_sql(sql, params))
        return max(int(result.rowcount or 0), 0)

    def count(self) -> int:
        return int(self.run(lambda conn: conn.exec_driver_sql(
            "SELECT count(*) FROM embeddings").scalar()) or 0)

    def close(self) -> None:
        self.engine.dispose()


def _copy_in(conn: Connection, rows: list[StoredVector]) -> int:
    """Binary COPY straight into `embeddings`, in one transaction: claims make a row that
    is already stored rare, and a COPY that meets one (a unique violation) is undone as a
    whole, so the batch then goes the staged way (`_copy_staged`). Straight in, 20,000
    new rows cost Postgres about a quarter less CPU than the staged way's two writes of
    each row."""
    raw = conn.connection.driver_connection
    assert raw is not None
    try:
        with raw.transaction():
            copy_rows(raw, _COLUMNS, _TYPES, (r.row() for r in rows))
        return len(rows)
    except psycopg.errors.UniqueViolation:
        return _copy_staged(conn, raw, rows)


def _copy_staged(conn: Connection, raw: psycopg.Connection[Any],
                 rows: list[StoredVector]) -> int:
    """Binary COPY into this session's temp table (created once per connection; its rows
    go at commit), then the new rows into `embeddings`, in one transaction."""
    with raw.transaction():
        if not conn.info.get(_STAGE_TABLE):
            raw.execute(f"CREATE TEMP TABLE IF NOT EXISTS {_STAGE_TABLE} (fingerprint text, "
                        "model text, revision text, dimensions int, dtype text, vector bytea)"
                        " ON COMMIT DELETE ROWS")
            conn.info[_STAGE_TABLE] = True
        copy_rows(raw, _STAGE_TABLE, _TYPES, (r.row() for r in rows))
        cur = raw.execute(f"INSERT INTO {_COLUMNS} SELECT * FROM {_STAGE_TABLE} "
                          "ORDER BY fingerprint ON CONFLICT (fingerprint) DO NOTHING")
        return max(int(cur.rowcount or 0), 0)


class SQLiteVectors(VectorStore):
    """On the database's own engine: one file, no links to ping or keep."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.engine = db.engine.execution_options(isolation_level="AUTOCOMMIT")

    def _run(self, statement: Callable[[Connection], T]) -> T:
        with map_db_errors(), self.engine.connect() as conn:
            return statement(conn)

    def get_many(self, fps: list[str]) -> dict[str, bytes]:
        """The driver's own statement, as on Postgres: building and compiling an `IN`
        construct for each lookup was 14% of an embedded job's interpreter time."""
        found: dict[str, bytes] = {}

        def lookup(conn: Connection) -> None:
            for i in range(0, len(fps), READ_CHUNK):
                part = tuple(fps[i:i + READ_CHUNK])
                marks = ",".join("?" * len(part))
                rows = conn.exec_driver_sql(_SQLITE_SELECT.format(marks=marks), part)
                found.update({fp: bytes(vec) for fp, vec in rows})

        if fps:
            self._run(lookup)
        return found

    def put_many(self, rows: list[StoredVector]) -> int:
        """One prepared INSERT run for every row (the driver's executemany, in one
        transaction), not one multi-row statement compiled per call: SQLAlchemy's
        compiler made a bound parameter for each value of each row, and that was half of
        an embedded bulk job's interpreter time with a fast model."""
        if not rows:
            return 0
        params = [r.row() for r in rows]
        with map_db_errors(), self.db.engine.begin() as conn:  # one transaction, one sync
            result = conn.exec_driver_sql(_SQLITE_INSERT, params)
        return max(int(result.rowcount or 0), 0)

    def count(self) -> int:
        return int(self._run(lambda conn: conn.scalar(
            select(func.count()).select_from(Embedding))) or 0)


def open_vectors(db: Database, *, sync_commit: bool = False) -> VectorStore:
    """The vector store of `db`'s database (`sync_commit`: wait for the WAL flush)."""
    if db.dialect == "postgresql":
        return PostgresVectors(db.url, db.timeouts, sync_commit=sync_commit)
    return SQLiteVectors(db)
