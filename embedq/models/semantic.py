"""The semantic cache's tables: entries (the source of truth), changes, namespaces.

Every FAISS index is a rebuildable view of `semantic_entries`. `semantic_changes` is the
log other processes follow by watermark: one row per entry added or deleted, with a
monotonic `seq` whose order is commit order (writers hold one advisory lock while they
write, see embedq.semantic.store). `semantic_namespaces` keeps per-namespace hit and
miss counters and marks a namespace as known.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.orm import Mapped, mapped_column

from embedq.models.api_key import DEFAULT_TENANT
from embedq.models.base import Base, UTCDateTime

# SQLite only auto-increments INTEGER PRIMARY KEY; Postgres gets BIGSERIAL.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class SemanticEntry(Base):
    """One (query, payload) pair in a namespace, with the query's vector in one space."""

    __tablename__ = "semantic_entries"
    __table_args__ = (
        UniqueConstraint("namespace", "space", "query_sha256",
                         name="uq_semantic_entries_query"),
        Index("ix_semantic_entries_ns_space", "namespace", "space"),
        Index("ix_semantic_entries_expires_at", "expires_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    namespace: Mapped[str] = mapped_column(String(255))
    model: Mapped[str] = mapped_column(String(255))
    space: Mapped[str] = mapped_column(String(64))  # model + revision + dimensions digest
    query: Mapped[str] = mapped_column(Text)
    query_sha256: Mapped[str] = mapped_column(String(64))
    vector: Mapped[bytes] = mapped_column(LargeBinary)  # float32 little-endian, unit length
    payload: Mapped[Any] = mapped_column(JSON)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    ttl_s: Mapped[int | None] = mapped_column(Integer, nullable=True)
    sliding: Mapped[bool] = mapped_column(Boolean, default=False)
    hit_count: Mapped[int] = mapped_column(BigInteger, default=0)
    last_hit_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class SemanticChange(Base):
    """One entry added ("put"), deleted ("delete"), or the log pruned ("pruned")."""

    __tablename__ = "semantic_changes"

    seq: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    entry_id: Mapped[int] = mapped_column(BigInteger)  # "pruned": the highest seq removed
    namespace: Mapped[str] = mapped_column(String(255))
    space: Mapped[str] = mapped_column(String(64))
    op: Mapped[str] = mapped_column(String(8))
    created_at: Mapped[datetime] = mapped_column(
        UTCDateTime(), server_default=func.now()
    )


class SemanticNamespace(Base):
    """A namespace that has held entries, with its lookup counters."""

    __tablename__ = "semantic_namespaces"

    namespace: Mapped[str] = mapped_column(String(255), primary_key=True)
    # The tenant that created the namespace (migration 0007); names are unique across
    # tenants, and another tenant's namespace answers "not found".
    tenant: Mapped[str] = mapped_column(String(64), default=DEFAULT_TENANT,
                                        server_default=DEFAULT_TENANT)
    hits: Mapped[int] = mapped_column(BigInteger, default=0)
    misses: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[datetime] = mapped_column(
        UTCDateTime(), server_default=func.now()
    )
