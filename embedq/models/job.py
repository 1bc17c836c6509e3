"""Jobs: one row per job, its items (one per input line) and its chunks.

A job's progress lives here, never in Redis: a chunk row turns `done` in one guarded
UPDATE (`WHERE status <> 'done'`), so a chunk task that runs twice counts once, and the
job's progress is the sum over its chunks. Items keep the text and its fingerprint, so
any worker can run any chunk again after the broker lost every message.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import (
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    func,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from embedq.models.api_key import DEFAULT_TENANT
from embedq.models.base import Base, UTCDateTime
from embedq.models.states import ChunkStatus, JobStatus, Priority


class CallbackState(StrEnum):
    """Delivery of a job's final state to its `callback_url` (jobs/callbacks.py)."""

    PENDING = "pending"  # set at submit; sent once the job ends, retried until due
    DELIVERED = "delivered"  # the receiver answered 2xx
    FAILED = "failed"  # attempts or time ran out; `callback_error` says why


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        Index("ix_jobs_callback_pending", "callback_next_at",
              postgresql_where=text("callback_state = 'pending'"),
              sqlite_where=text("callback_state = 'pending'")),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    # The tenant that owns the job (migration 0007): another tenant's job is "not found".
    tenant: Mapped[str] = mapped_column(String(64), default=DEFAULT_TENANT,
                                        server_default=DEFAULT_TENANT, index=True)
    # A JobStatus; 32 wide since "succeeded_with_errors" (migration 0004).
    status: Mapped[str] = mapped_column(String(32), default=JobStatus.QUEUED, index=True)
    priority: Mapped[str] = mapped_column(String(8), default=Priority.BULK)
    model: Mapped[str] = mapped_column(String(255))
    revision: Mapped[str] = mapped_column(String(255))
    dimensions: Mapped[int | None] = mapped_column(Integer, nullable=True)
    normalize: Mapped[bool] = mapped_column(Boolean, default=True)
    source: Mapped[str | None] = mapped_column(String(255), nullable=True)
    # Off-peak window "HH:MM-HH:MM" in `timezone`; None runs at once.
    window: Mapped[str | None] = mapped_column(String(11), nullable=True)
    timezone: Mapped[str | None] = mapped_column(String(64), nullable=True)
    not_before: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    total: Mapped[int] = mapped_column(Integer, default=0)
    chunks: Mapped[int] = mapped_column(Integer, default=0)
    # True once every item is stored; a job still loading is never dispatched.
    loaded: Mapped[bool] = mapped_column(Boolean, default=False)
    # Bumped on every dispatch: a chord callback of an older wave is stale and ignored.
    generation: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), server_default=func.now())
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # Last dispatch or chunk completion: a running job idle past the stall limit is
    # re-dispatched (its messages were lost with a flushed broker or killed workers).
    progress_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # Where to POST the final state (migration 0006); None: no callback. The delivery
    # state lives here, so a delivery survives the death of every process.
    callback_url: Mapped[str | None] = mapped_column(String(2048), nullable=True)
    callback_state: Mapped[str | None] = mapped_column(String(16), nullable=True)
    callback_attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # The next attempt is due then; also a lease: an attempt in flight pushes it ahead.
    callback_next_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    callback_error: Mapped[str | None] = mapped_column(Text, nullable=True)


class JobItem(Base):
    __tablename__ = "job_items"

    # No foreign key: its check was a lookup of the job for each stored item (migration
    # 0011); `JobStore.delete` removes a job's items with it.
    job_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    index: Mapped[int] = mapped_column(Integer, primary_key=True)
    external_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    text: Mapped[str] = mapped_column(Text)
    fingerprint: Mapped[str] = mapped_column(String(64))
    error: Mapped[str | None] = mapped_column(Text, nullable=True)


class JobChunk(Base):
    __tablename__ = "job_chunks"

    job_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
    )
    chunk: Mapped[int] = mapped_column(Integer, primary_key=True)
    start: Mapped[int] = mapped_column(Integer)  # first item index
    stop: Mapped[int] = mapped_column(Integer)  # one past the last item index
    tokens: Mapped[int] = mapped_column(Integer, default=0)  # estimated
    status: Mapped[str] = mapped_column(String(8), default=ChunkStatus.PENDING)
    encoded: Mapped[int] = mapped_column(Integer, default=0)  # distinct texts computed
    done: Mapped[int] = mapped_column(Integer, default=0)  # items with a vector
    cached: Mapped[int] = mapped_column(Integer, default=0)
    coalesced: Mapped[int] = mapped_column(Integer, default=0)
    failed: Mapped[int] = mapped_column(Integer, default=0)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
