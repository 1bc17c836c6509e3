"""Model aliases switched at run time (`embedq models switch`), one row per alias.

An alias set here overrides EMBEDQ_MODEL_ALIASES in every process: the switch is one
committed upsert, so every reader sees the old model or the new one, never a mix.
Readers cache the table for `AliasCache.ttl_s` (2 s), so a switch reaches every process
within that time and a request reads no table.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

from sqlalchemy import String, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from embedq.config import Settings
from embedq.errors import EmbedqError
from embedq.models.base import Base, UTCDateTime
from embedq.models.engine import Database

log = logging.getLogger("embedq.models")

ALIAS_TTL_S = 2.0  # how long a process keeps its reading of the switched aliases


class ModelAlias(Base):
    __tablename__ = "model_aliases"

    alias: Mapped[str] = mapped_column(String(64), primary_key=True)
    model: Mapped[str] = mapped_column(String(64))  # a served model's name (EMBEDQ_MODELS)
    # What the name meant when switched: its fingerprint model and default revision.
    source: Mapped[str] = mapped_column(String(255))
    revision: Mapped[str] = mapped_column(String(255))
    switched_at: Mapped[datetime] = mapped_column(UTCDateTime())


def read_aliases(db: Database) -> dict[str, str]:
    """alias -> model name, as switched."""
    with db.session() as s:
        return {row.alias: row.model for row in s.scalars(select(ModelAlias))}


def switch_alias(db: Database, alias: str, model: str, source: str, revision: str) -> None:
    """Point `alias` at `model` in one committed statement (insert or update)."""
    with db.session() as s:  # one transaction, committed on leaving
        write_alias(s, alias, model, source, revision)


def write_alias(s: Session, alias: str, model: str, source: str, revision: str) -> None:
    """Point `alias` at `model` within `s`, committed with what else `s` writes."""
    row = s.get(ModelAlias, alias, with_for_update=True)
    now = datetime.now(UTC)
    if row is None:
        s.add(ModelAlias(alias=alias, model=model, source=source, revision=revision,
                         switched_at=now))
    else:
        row.model, row.source, row.revision, row.switched_at = model, source, revision, now


class AliasCache:
    """The switched aliases, read at most every `ttl_s`; a database without the table
    (not yet migrated) or out of reach keeps the last reading (at first: none)."""

    def __init__(self, db: Database, ttl_s: float = ALIAS_TTL_S) -> None:
        self.db = db
        self.ttl_s = ttl_s
        self._value: dict[str, str] = {}
        self._at = float("-inf")
        self._lock = threading.Lock()
        self._warned = False

    def __call__(self) -> dict[str, str]:
        if time.monotonic() - self._at < self.ttl_s:
            return self._value
        with self._lock:
            if time.monotonic() - self._at >= self.ttl_s:
                try:
                    self._value = read_aliases(self.db)
                except (EmbedqError, Exception) as exc:
                    if not self._warned:
                        log.warning("switched model aliases unreadable (%s): keeping the "
                                    "last reading; run `embedq db upgrade` if the table "
                                    "model_aliases is missing", type(exc).__name__)
                    self._warned = True
                self._at = time.monotonic()
        return self._value


def switched_aliases(settings: Settings, db: Database) -> AliasCache | None:
    """The switched aliases to read, with EMBEDQ_MODELS (one model has nothing to switch
    to, and its requests read no table)."""
    return AliasCache(db) if settings.deployment.model.models is not None else None
