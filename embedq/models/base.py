"""The declarative base and the column types shared by every table; constraint names are
deterministic."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, Dialect, MetaData
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.types import TypeDecorator

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class UTCDateTime(TypeDecorator[datetime]):
    """`DateTime(timezone=True)` that reads back aware UTC datetimes on every database.

    SQLite keeps a timestamp as text without its offset and its driver hands it back
    naive; Postgres hands back aware ones in the session's time zone. A row's time
    compared with an aware `now` raised TypeError in embedded mode only.

    - Bound: converted to UTC, so SQLite stores the moment, not a non-UTC wall clock (its
      timestamps compare as text). A naive datetime is taken to be UTC, not refused: that
      is embedq's rule for naive moments (`limits.check_moment`), and what SQLite's
      CURRENT_TIMESTAMP defaults write.
    - Read: always aware, in UTC.

    The DDL type is still `DateTime(timezone=True)`: no migration.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else utc(value)

    def process_result_value(self, value: Any | None, dialect: Dialect) -> datetime | None:
        return None if value is None else utc(value)


def utc(moment: datetime) -> datetime:
    """`moment` as an aware UTC datetime; a naive one is taken to be UTC already."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
