"""The durable tier: Postgres (or SQLite), the source of truth for vectors.

Reads are one query per request (chunked only past `READ_CHUNK` fingerprints); writes are
one `INSERT .. ON CONFLICT DO NOTHING` per batch, so a duplicate execution is harmless:
the primary key on the fingerprint is the real fence. Both run outside an explicit
transaction (`Database.statement`): one statement is atomic on its own, and BEGIN and
COMMIT were two of a write's four round trips.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, select
from sqlalchemy.dialects import sqlite

from embedq.models import Database, Embedding

READ_CHUNK = 5000
_PG_SELECT = "SELECT fingerprint, vector FROM embeddings WHERE fingerprint = ANY(%s)"
_PG_INSERT = ("INSERT INTO embeddings (fingerprint, model, revision, dimensions, dtype, vector) "
              "VALUES {values} ON CONFLICT (fingerprint) DO NOTHING")


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


class DurableStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def get_many(self, fps: list[str]) -> dict[str, bytes]:
        if not fps:
            return {}
        postgres = self.db.dialect == "postgresql"

        def lookup(s: Connection) -> dict[str, bytes]:
            found: dict[str, bytes] = {}
            for i in range(0, len(fps), READ_CHUNK):
                part = fps[i : i + READ_CHUNK]
                # On every request's path, Postgres gets the driver's own statement, not a
                # compiled construct (a third of a lookup's client CPU went to SQLAlchemy's
                # execution machinery).
                rows = s.exec_driver_sql(_PG_SELECT, (part,)) if postgres else s.execute(
                    select(Embedding.fingerprint, Embedding.vector).where(
                        self.db.among(Embedding.fingerprint, part)))
                found.update({fp: bytes(vec) for fp, vec in rows})
            return found

        return self.db.statement(lookup)

    def put_many(self, rows: list[StoredVector]) -> int:
        """Insert rows whose fingerprint is new; return how many were new."""
        if not rows:
            return 0
        if self.db.dialect == "postgresql":
            params = tuple(v for r in rows for v in (r.fingerprint, r.model, r.revision,
                                                      r.dimensions, r.dtype, r.vector))
            sql = _PG_INSERT.format(values=",".join(["(%s,%s,%s,%s,%s,%s)"] * len(rows)))

            def insert(s: Connection) -> Any:
                return s.exec_driver_sql(sql, params)
        else:
            values = [{"fingerprint": r.fingerprint, "model": r.model,
                       "revision": r.revision, "dimensions": r.dimensions,
                       "dtype": r.dtype, "vector": r.vector} for r in rows]

            def insert(s: Connection) -> Any:
                return s.execute(sqlite.insert(Embedding).values(values)
                                 .on_conflict_do_nothing(index_elements=["fingerprint"]))
        # Only new rows are inserted, so a second try (a dropped connection) is safe.
        result = self.db.statement(insert)
        return max(int(getattr(result, "rowcount", 0) or 0), 0)

    def count(self) -> int:
        from sqlalchemy import func

        with self.db.session() as s:
            return int(s.scalar(select(func.count()).select_from(Embedding)) or 0)
