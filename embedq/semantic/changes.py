"""Reading the semantic cache's change log: what the index followers (sync.py) read.

The table side of the watermark locks.py describes: the changes of the namespaces a
process holds after a `seq` (read under their locks), one namespace's vectors with the
watermark they are exact at, the marker a snapshot remembers, and the horizon below which
the log was pruned. `SemanticStore` has these methods (it is a `ChangeLogReads`); the
writes that log changes are in store.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select

from embedq.models import Database, SemanticChange, SemanticEntry
from embedq.models.engine import map_db_errors
from embedq.semantic.locks import Scope, take

FOLLOW_BATCH = 10_000


@dataclass(frozen=True)
class Change:
    seq: int
    entry_id: int
    namespace: str
    space: str
    op: str
    vector: bytes | None  # "put" whose entry still exists


class ChangeLogReads:
    """The change log's reads, for a store holding `db`."""

    db: Database

    def changes_after(self, seq: int, limit: int = 10_000) -> list[Change]:
        with self.db.session() as s:
            rows = s.execute(
                select(SemanticChange, SemanticEntry.vector)
                .outerjoin(SemanticEntry, (SemanticEntry.id == SemanticChange.entry_id)
                           & (SemanticChange.op == "put"))
                .where(SemanticChange.seq > seq).order_by(SemanticChange.seq).limit(limit)
            ).all()
            return [
                Change(c.seq, c.entry_id, c.namespace, c.space, c.op,
                       bytes(vec) if vec is not None else None)
                for c, vec in rows
            ]

    def follow(self, namespaces: list[str], after: int, limit: int = FOLLOW_BATCH
               ) -> tuple[int, list[Change]]:
        """(watermark, the changes of `namespaces` past `after` up to it, in `seq` order),
        read under the namespaces' shared locks: every change of theirs at or below the
        watermark is in the answer or was before `after` (locks.py). The watermark is
        the log's max(seq), or the last change read when `limit` cut the answer."""
        with self.db.session() as s:
            if self.db.dialect == "postgresql":
                take(s, Scope.following(namespaces), self.db.timeouts.lock_ms)
            top = int(s.scalar(select(func.max(SemanticChange.seq))) or 0)
            rows = s.execute(
                select(SemanticChange, SemanticEntry.vector)
                .outerjoin(SemanticEntry, (SemanticEntry.id == SemanticChange.entry_id)
                           & (SemanticChange.op == "put"))
                .where(SemanticChange.seq > after, SemanticChange.seq <= top,
                       SemanticChange.namespace.in_(namespaces))
                .order_by(SemanticChange.seq).limit(limit)
            ).all()
            changes = [Change(c.seq, c.entry_id, c.namespace, c.space, c.op,
                              bytes(vec) if vec is not None else None) for c, vec in rows]
        return (changes[-1].seq if len(changes) >= limit else top), changes

    def namespace_vectors(self, namespace: str, space: str) -> tuple[int, list[int],
                                                                     list[bytes]]:
        """(watermark, ids, vectors) of one namespace in `space`, exact at the watermark:
        read under the namespace's shared lock, so no write of it is half done."""
        with self.db.session() as s:
            if self.db.dialect == "postgresql":
                take(s, Scope.following([namespace]), self.db.timeouts.lock_ms)
            top = int(s.scalar(select(func.max(SemanticChange.seq))) or 0)
            rows = s.execute(
                select(SemanticEntry.id, SemanticEntry.vector)
                .where(SemanticEntry.namespace == namespace, SemanticEntry.space == space)
                .order_by(SemanticEntry.id)
            ).all()
        return top, [int(r[0]) for r in rows], [bytes(r[1]) for r in rows]

    def change_marker(self, seq: int) -> list[Any] | None:
        """What the change log holds at `seq` (entry, op, namespace), or None: a snapshot
        remembers it to prove later that it came from this database."""
        if seq <= 0:
            return None
        with self.db.session() as s:
            row = s.execute(select(SemanticChange.entry_id, SemanticChange.op,
                                   SemanticChange.namespace)
                            .where(SemanticChange.seq == seq)).first()
        return [int(row[0]), str(row[1]), str(row[2])] if row is not None else ["missing"]

    def pruned_horizon(self) -> int:
        with self.db.session() as s:
            got = s.scalar(select(func.max(SemanticChange.entry_id))
                           .where(SemanticChange.op == "pruned"))
            return int(got or 0)

    def snapshot(self, space: str, batch: int = 20_000) -> tuple[int, Iterator[
            list[tuple[int, str, bytes]]]]:
        """(watermark, batches of (id, namespace, vector)) read in one consistent snapshot."""
        conn = self.db.engine.connect()
        try:
            with map_db_errors():
                if self.db.dialect == "postgresql":
                    conn = conn.execution_options(isolation_level="REPEATABLE READ")
                conn.begin()
                watermark = int(conn.scalar(select(func.max(SemanticChange.seq))) or 0)
        except BaseException:
            conn.close()
            raise

        def batches() -> Iterator[list[tuple[int, str, bytes]]]:
            try:
                with map_db_errors():
                    result = conn.execution_options(yield_per=batch).execute(
                        select(SemanticEntry.id, SemanticEntry.namespace, SemanticEntry.vector)
                        .where(SemanticEntry.space == space).order_by(SemanticEntry.id)
                    )
                    for part in result.partitions(batch):
                        yield [(int(i), str(ns), bytes(v)) for i, ns, v in part]
            finally:
                conn.close()

        return watermark, batches()
