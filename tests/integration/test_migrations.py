"""Alembic migrations go up and down on Postgres and on SQLite."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

from embedq.models import migrate
from embedq.models.engine import normalize_url
from tests import support


def tables(url: str) -> set[str]:
    engine = create_engine(normalize_url(url))
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def round_trip(url: str) -> None:
    migrate.upgrade(url)
    assert "embeddings" in tables(url)
    head = migrate.current(url)
    assert head
    migrate.downgrade(url, "base")
    assert tables(url) == set()
    assert migrate.current(url) is None
    migrate.upgrade(url)
    assert migrate.current(url) == head


def test_migrations_round_trip_on_sqlite(tmp_path: Path) -> None:
    round_trip(f"sqlite:///{tmp_path / 'embedq.db'}")


@pytest.mark.integration
def test_migrations_round_trip_on_postgres() -> None:
    support.check_postgres()
    import psycopg

    name = "embedq_migrate_test"
    with psycopg.connect(support.PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = support.PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    try:
        round_trip(url)
    finally:
        with psycopg.connect(support.PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
