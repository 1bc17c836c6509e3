"""The jobs migration upgrades and downgrades on Postgres and SQLite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import inspect

from embedq.models import migrate
from embedq.models.engine import make_engine
from tests import support

pytestmark = pytest.mark.integration

JOB_TABLES = {"jobs", "job_items", "job_chunks"}


def tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


@pytest.fixture(params=["postgresql", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'jobs.db'}"
        return
    support.check_postgres()
    with support.temporary_database() as pg:
        migrate.downgrade(pg, "base")
        yield pg


def test_jobs_tables_come_and_go_with_their_revision(url: str) -> None:
    migrate.upgrade(url)
    assert JOB_TABLES | {"embeddings"} <= tables(url)
    assert migrate.current(url) == migrate.heads()[0]
    migrate.downgrade(url, "0001")
    assert not JOB_TABLES & tables(url) and "embeddings" in tables(url)
    migrate.upgrade(url)
    assert tables(url) >= JOB_TABLES
