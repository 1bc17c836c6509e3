"""API keys: one row per key, holding its digest (never the key), tenant, scopes, limits.

A key is a random token shown once when it is created (`embedq keys create`); the table
keeps `sha256` of it, so a copy of the database lets no one call the API. A revoked key
keeps its row (`revoked_at`) so the audit trail can still name it.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Float, String, func
from sqlalchemy.orm import Mapped, mapped_column

from embedq.models.base import Base, UTCDateTime

DEFAULT_TENANT = "default"


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)  # "key_" + 16 hex: public
    tenant: Mapped[str] = mapped_column(String(64), index=True)
    name: Mapped[str] = mapped_column(String(255))
    digest: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 hex of the key
    scopes: Mapped[str] = mapped_column(String(255))  # comma-separated, sorted
    rate_per_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    texts_per_day: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), server_default=func.now())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
