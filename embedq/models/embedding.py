"""The durable store: one row per fingerprint, the vector as little-endian float32 bytes."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, LargeBinary, String, func
from sqlalchemy.orm import Mapped, mapped_column

from embedq.models.base import Base, UTCDateTime


class Embedding(Base):
    __tablename__ = "embeddings"

    fingerprint: Mapped[str] = mapped_column(String(64), primary_key=True)
    model: Mapped[str] = mapped_column(String(255))
    revision: Mapped[str] = mapped_column(String(255))
    dimensions: Mapped[int] = mapped_column(Integer)
    dtype: Mapped[str] = mapped_column(String(16), default="float32")
    vector: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), server_default=func.now())
