"""What a database error says to whoever reads it (models.engine.map_db_errors)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from embedq.errors import ConfigError, DatabaseUnavailable
from embedq.models import Database


def test_sqlite_without_the_tables_says_to_migrate_not_to_retry(tmp_path: Path) -> None:
    """SQLite reports a missing table as an OperationalError: it read as an unreachable
    database ("retry shortly"), which no retry mends."""
    db = Database(f"sqlite:///{tmp_path / 'fresh.db'}")
    try:
        with pytest.raises(ConfigError, match="no embedq tables: run `embedq db upgrade`"), \
                db.session() as s:
            s.execute(text("SELECT id FROM api_keys"))
    finally:
        db.dispose()


def test_a_file_sqlite_cannot_open_is_still_unavailable(tmp_path: Path) -> None:
    folder = tmp_path / "a-folder.db"
    folder.mkdir()  # a directory where the file should be: sqlite cannot open it
    db = Database(f"sqlite:///{folder}")
    try:
        with pytest.raises(DatabaseUnavailable), db.session() as s:
            s.execute(text("SELECT 1"))
    finally:
        db.dispose()
