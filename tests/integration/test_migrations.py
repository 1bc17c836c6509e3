"""Alembic migrations go up and down on Postgres and on SQLite, along one line of revisions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
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


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with no embedq tables yet."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'embedq.db'}"
        return
    support.check_postgres()
    with support.temporary_database() as url:
        migrate.downgrade(url, "base")
        yield url


def test_the_scripts_have_exactly_one_head() -> None:
    """A second head (two revisions with one parent, no merge) breaks `upgrade head` and
    makes `downgrade -1` ambiguous: add a merge revision (`alembic merge heads`)."""
    scripts = ScriptDirectory(str(migrate.script_location()))
    assert len(scripts.get_heads()) == 1, scripts.get_heads()
    assert migrate.heads() == tuple(scripts.get_heads())


def test_upgrade_head_reaches_the_one_head(empty_url: str) -> None:
    migrate.upgrade(empty_url, "head")
    assert migrate.current(empty_url) == migrate.heads()[0]
    assert {"embeddings", "jobs", "semantic_entries"} <= tables(empty_url)


def test_downgrade_one_step_then_upgrade_again(empty_url: str) -> None:
    migrate.upgrade(empty_url)
    head = migrate.heads()[0]
    migrate.downgrade(empty_url, "-1")
    assert migrate.current(empty_url) not in (None, head)
    migrate.upgrade(empty_url, "head")
    assert migrate.current(empty_url) == head


def test_full_round_trip_down_to_base_and_back(empty_url: str) -> None:
    migrate.upgrade(empty_url)
    assert "embeddings" in tables(empty_url)
    head = migrate.current(empty_url)
    assert head == migrate.heads()[0]
    migrate.downgrade(empty_url, "base")
    assert tables(empty_url) == set()
    assert migrate.current(empty_url) is None
    migrate.upgrade(empty_url)
    assert migrate.current(empty_url) == head


def test_upgrade_walks_every_revision_one_at_a_time(empty_url: str) -> None:
    """Each revision applies on its own (a revision that only works together with the
    next one would break a deployment that stops between them)."""
    scripts = ScriptDirectory(str(migrate.script_location()))
    for script in reversed(list(scripts.walk_revisions())):
        migrate.upgrade(empty_url, script.revision)
    assert migrate.current(empty_url) == migrate.heads()[0]


@pytest.mark.integration
@pytest.mark.parametrize("command", ["worker", "serve"])
def test_worker_and_serve_on_an_unmigrated_database_say_to_migrate(
        redis_url: str, command: str) -> None:
    """`embedq serve` ended its startup in a traceback there (the worker already said)."""
    import subprocess
    import sys

    support.check_postgres()
    with support.temporary_database() as url:
        migrate.downgrade(url, "base")
        env = {**support.cluster_env(redis_url, url), "EMBEDQ_ENCODER": "hashing"}
        argv = [command] if command == "worker" else [command, "--port",
                                                      str(support.free_port())]
        run = subprocess.run([sys.executable, "-m", "embedq.cli", *argv], env=env,
                             capture_output=True, text=True, timeout=60, cwd=support.ROOT)
    assert run.returncode == 2, run.stderr[-2000:]
    assert "has no embedq tables: run `embedq db upgrade` first" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_revision_alembic_cannot_find_names_the_ones_there_are(empty_url: str) -> None:
    """It ended `embedq db upgrade nope` in Alembic's traceback."""
    from embedq.errors import ConfigError

    for step in (migrate.upgrade, migrate.downgrade):
        with pytest.raises(ConfigError, match=r"revision 'nope': Can't locate .* give head, "
                                              r"base or one of 0001, "):
            step(empty_url, "nope")
    migrate.upgrade(empty_url)  # the database is left as it was: it still migrates
    assert migrate.current(empty_url) == migrate.heads()[0]
