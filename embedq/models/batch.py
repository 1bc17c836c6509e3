"""The OpenAI Batch API's tables: uploaded files and batches over jobs.

An uploaded file keeps its bytes here (`content`), up to EMBEDQ_MAX_FILE_BYTES. A file a
batch produced (its output or error file) keeps no content: it is rendered from the
batch's job when read, so vectors are stored once, in `embeddings`. A batch is a job plus
what the OpenAI shape needs on top of it: the input file, the endpoint, metadata, and the
output files once it is final.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    func,
)
from sqlalchemy.orm import Mapped, mapped_column

from embedq.models.base import Base, UTCDateTime


class FilePurpose(StrEnum):
    BATCH = "batch"  # uploaded: request lines
    BATCH_OUTPUT = "batch_output"  # produced: one response line per request


class File(Base):
    __tablename__ = "files"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)  # "file-" + 32 hex
    purpose: Mapped[str] = mapped_column(String(16))
    filename: Mapped[str] = mapped_column(String(255))
    # None for a produced file until it is first read (then its rendered size).
    size: Mapped[int | None] = mapped_column("bytes", BigInteger, nullable=True)
    # Deferred: listing and describing files never loads their bytes.
    content: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True, deferred=True)
    # A produced file: the batch it renders, and whether it is its error file.
    batch_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    errors: Mapped[bool] = mapped_column(Boolean, default=False)
    # The tenant that uploaded (or whose batch produced) the file; set for every file
    # since migration 0007, None only on rows older than it (read as the default tenant).
    owner: Mapped[str | None] = mapped_column(String(255), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(),
                                                 server_default=func.now(), index=True)


class Batch(Base):
    __tablename__ = "batches"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)  # "batch_" + 32 hex
    input_file_id: Mapped[str] = mapped_column(String(40))
    job_id: Mapped[str] = mapped_column(String(32), ForeignKey("jobs.id", ondelete="CASCADE"))
    endpoint: Mapped[str] = mapped_column(String(64))
    completion_window: Mapped[str] = mapped_column(String(8))
    # `metadata` is taken by SQLAlchemy's declarative base.
    meta: Mapped[dict[str, Any] | None] = mapped_column("metadata", JSON, nullable=True)
    requests: Mapped[int] = mapped_column(Integer)  # request lines in the input file
    encoding_format: Mapped[str] = mapped_column(String(8))  # one for every line
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(),
                                                 server_default=func.now(), index=True)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    cancelled_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    expired_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # Set once, when the batch is first seen final: counts and produced files.
    finalized_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    completed: Mapped[int] = mapped_column(Integer, default=0)
    failed: Mapped[int] = mapped_column(Integer, default=0)
    output_file_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    error_file_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
