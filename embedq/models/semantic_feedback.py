"""The semantic cache's error budget: served hits, feedback on them, per-entry negatives.

`semantic_budgets` holds a namespace's policy: its base threshold (null: the server's
default), its `max_false_hit_rate` (null: no budget), and the threshold the feedback rule
(embedq.semantic.budget) last derived; under a budget, also its trust score (base and
derived): a hit at or above it that the verifier refused only on a slot the model judges
(content, disjoint) is served, and its verdicts move that score. `semantic_hits`
records each match a lookup served, under an unguessable id the caller sends back with its
verdict (and the trust score it was served over, if it was); rows expire
(EMBEDQ_SEMANTIC_FEEDBACK_TTL_S) and are swept. `semantic_feedback` keeps every verdict
with the score and the threshold in force when the hit was served: the rule reads them.
`semantic_negatives` holds the vector of a query a hit was marked wrong for, against the
entry: that entry is refused for queries within a tight radius of it.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    LargeBinary,
    String,
    Text,
    func,
)
from sqlalchemy.orm import Mapped, mapped_column

from embedq.models.base import Base, UTCDateTime
from embedq.models.semantic import BigId


class SemanticBudget(Base):
    """A namespace's threshold policy: base, error budget, and the derived threshold."""

    __tablename__ = "semantic_budgets"

    namespace: Mapped[str] = mapped_column(String(255), primary_key=True)
    base_threshold: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_false_hit_rate: Mapped[float | None] = mapped_column(Float, nullable=True)
    threshold: Mapped[float | None] = mapped_column(Float, nullable=True)  # from feedback
    base_trust_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    trust_score: Mapped[float | None] = mapped_column(Float, nullable=True)  # from feedback
    updated_at: Mapped[datetime] = mapped_column(
        UTCDateTime(), server_default=func.now()
    )


class SemanticHit(Base):
    """One match a lookup served, kept until its feedback window closes."""

    __tablename__ = "semantic_hits"
    __table_args__ = (Index("ix_semantic_hits_expires_at", "expires_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)  # random hex
    namespace: Mapped[str] = mapped_column(String(255))
    space: Mapped[str] = mapped_column(String(64))
    entry_id: Mapped[int] = mapped_column(BigInteger)
    query: Mapped[str] = mapped_column(Text)  # the asked query, embedded again on a "wrong"
    score: Mapped[float] = mapped_column(Float)
    threshold: Mapped[float] = mapped_column(Float)  # in force when the hit was served
    # The trust score it was served over (a model-judged conflict); null: no conflict.
    trust_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    correct: Mapped[bool | None] = mapped_column(Boolean, nullable=True)  # the verdict
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())


class SemanticFeedback(Base):
    """One verdict on a served hit: the evidence the threshold rule reads."""

    __tablename__ = "semantic_feedback"
    __table_args__ = (Index("ix_semantic_feedback_ns_id", "namespace", "id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    namespace: Mapped[str] = mapped_column(String(255))
    entry_id: Mapped[int] = mapped_column(BigInteger)
    score: Mapped[float] = mapped_column(Float)
    threshold: Mapped[float] = mapped_column(Float)
    trust_score: Mapped[float | None] = mapped_column(Float, nullable=True)  # as the hit's
    correct: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class SemanticNegative(Base):
    """A query vector an entry must not match: its hit was marked wrong.

    Deleting the entry deletes its negatives on Postgres (the foreign key); SQLite does
    not enforce it, so readers also ignore a negative older than its entry (a reused id)."""

    __tablename__ = "semantic_negatives"
    __table_args__ = (Index("ix_semantic_negatives_entry_id", "entry_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    entry_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("semantic_entries.id", ondelete="CASCADE"))
    namespace: Mapped[str] = mapped_column(String(255))
    vector: Mapped[bytes] = mapped_column(LargeBinary)  # float32 little-endian, unit length
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
