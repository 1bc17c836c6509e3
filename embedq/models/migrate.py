"""Alembic, driven from code: the only way embedq's tables are created or changed."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from embedq.models.engine import map_db_errors, normalize_url

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["url"] = normalize_url(url)
    return cfg


def upgrade(url: str, revision: str = "heads") -> None:
    with map_db_errors():
        command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    with map_db_errors():
        command.downgrade(alembic_config(url), revision)


def current(url: str) -> str | None:
    """The current revision(s), comma-joined when feature branches are not merged yet."""
    from alembic.runtime.migration import MigrationContext

    from embedq.models.engine import make_engine

    engine = make_engine(url)
    try:
        with map_db_errors(), engine.connect() as conn:
            heads = MigrationContext.configure(conn).get_current_heads()
            return ",".join(sorted(heads)) or None
    finally:
        engine.dispose()
