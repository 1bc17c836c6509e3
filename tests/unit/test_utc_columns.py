"""Datetime columns read back aware and in UTC, on SQLite (embedded mode) as on Postgres.

SQLite keeps no offset and its driver hands back naive datetimes; a row's time compared
with an aware `now` then raised TypeError, in embedded mode only (`POST /v1/batches`
answered 500). `UTCDateTime` makes every column read back aware UTC, so no reader patches.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import select, text

from embedq.models import Database, Job, JobStatus, migrate
from tests import support

EAST = timezone(timedelta(hours=5, minutes=30))


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A database migrated to head, as embedded mode (SQLite) or a cluster opens it."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'embedq.db'}"
        migrate.upgrade(url)
        database = Database(url)
        yield database
        database.dispose()
        return
    support.check_postgres()
    with support.temporary_database() as url:
        database = Database(url)
        yield database
        database.dispose()


def job(job_id: str, **times: datetime) -> Job:
    return Job(id=job_id, status=JobStatus.QUEUED, priority="bulk", model="m", revision="r",
               normalize=True, total=0, chunks=0, loaded=True, generation=0, **times)


def test_a_row_reads_back_aware_utc_whatever_offset_or_none_it_was_written_with(
        db: Database) -> None:
    moment = datetime(2030, 6, 1, 12, 30, 15, 250000, tzinfo=UTC)
    with db.session() as s:
        s.add(job("offset", not_before=moment.astimezone(EAST)))
        # naive is read as UTC, as everywhere in embedq (limits.check_moment)
        s.add(job("naive", not_before=moment.replace(tzinfo=None)))
    with db.session() as s:
        if db.dialect == "postgresql":  # the driver then hands back +05:30 datetimes
            s.execute(text("SET LOCAL TIME ZONE 'Asia/Kolkata'"))
        rows = {row.id: row for row in s.scalars(select(Job))}
    for row in rows.values():
        assert row.not_before is not None and row.not_before.tzinfo is UTC
        assert row.not_before == moment
        # server_default now(): SQLite's CURRENT_TIMESTAMP is naive UTC text
        assert row.created_at.tzinfo is UTC
        assert abs(row.created_at - datetime.now(UTC)) < timedelta(minutes=5)
        assert row.finished_at is None


def test_a_bound_moment_compares_in_sql_as_the_moment_not_its_wall_clock(
        db: Database) -> None:
    """SQLite compares timestamps as text: a moment bound in another offset than the
    stored ones would be ordered by its wall clock (12:00+05:30 after 07:00 UTC)."""
    stored = datetime(2030, 6, 1, 7, 0, tzinfo=UTC)
    with db.session() as s:
        s.add(job("j", not_before=stored))
    earlier_elsewhere = datetime(2030, 6, 1, 12, 0, tzinfo=EAST)  # 06:30 UTC
    with db.session() as s:
        assert s.scalars(select(Job.id).where(Job.not_before > earlier_elsewhere)).all() \
            == ["j"]
        assert s.scalar(select(Job.not_before).where(Job.id == "j")) == stored
