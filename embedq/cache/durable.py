"""The durable tier: Postgres (or SQLite), the source of truth for vectors.

Reads are one query per request (chunked only past `READ_CHUNK` fingerprints); writes are
one `INSERT .. ON CONFLICT DO NOTHING` per batch, so a duplicate execution is harmless:
the primary key on the fingerprint is the real fence. Vector writes commit asynchronously
on Postgres (`ASYNC_COMMIT` says what that risks, and why it is safe).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from sqlalchemy import select, text
from sqlalchemy.dialects import postgresql, sqlite

from embedq.models import Database, Embedding

READ_CHUNK = 5000

# Vector rows commit without waiting for their WAL flush (an fsync: 4-12 ms on the online
# answer's critical path on the development machine). The rows are visible to every other
# session at once, as with a synchronous commit; only a crash of the Postgres server itself
# can lose the last few hundred ms of them (3 x wal_writer_delay at most), consistently,
# and a lost row is a cache entry: the next request for it computes it again. The next
# synchronous commit (a job's chunk closing, any job or batch row) flushes every vector
# row committed before it, so a job never counts an item whose vector a crash could lose.
ASYNC_COMMIT = text("SET LOCAL synchronous_commit TO off")


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
        found: dict[str, bytes] = {}
        if not fps:
            return found
        with self.db.session() as s:
            for i in range(0, len(fps), READ_CHUNK):
                part = fps[i : i + READ_CHUNK]
                rows = s.execute(
                    select(Embedding.fingerprint, Embedding.vector).where(
                        self.db.among(Embedding.fingerprint, part)
                    )
                )
                found.update({fp: bytes(vec) for fp, vec in rows})
        return found

    def put_many(self, rows: list[StoredVector]) -> int:
        """Insert rows whose fingerprint is new; return how many were new."""
        if not rows:
            return 0
        values = [
            {
                "fingerprint": r.fingerprint,
                "model": r.model,
                "revision": r.revision,
                "dimensions": r.dimensions,
                "dtype": r.dtype,
                "vector": r.vector,
            }
            for r in rows
        ]
        insert = postgresql.insert if self.db.dialect == "postgresql" else sqlite.insert
        stmt = insert(Embedding).values(values).on_conflict_do_nothing(
            index_elements=["fingerprint"]
        )
        with self.db.session() as s:
            if self.db.dialect == "postgresql":
                s.execute(ASYNC_COMMIT)
            result = s.execute(stmt)
        return max(int(getattr(result, "rowcount", 0) or 0), 0)

    def count(self) -> int:
        from sqlalchemy import func

        with self.db.session() as s:
            return int(s.scalar(select(func.count()).select_from(Embedding)) or 0)
