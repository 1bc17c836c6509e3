"""Alembic, driven from code: the only way embedq's tables are created or changed.

The scripts live in the repository's top-level `migrations/` and ship inside the package
as `embedq/migrations` (a link to it in the source tree, copied into the wheel as package
data), so they are found next to the imported `embedq`, however it was installed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util import CommandError

from embedq.errors import ConfigError
from embedq.models.engine import map_db_errors, normalize_url


def script_location() -> Path:
    """The migration scripts of the imported embedq package."""
    location = Path(__file__).parent.parent / "migrations"
    if not (location / "env.py").is_file():
        raise ConfigError(
            f"embedq's migration scripts are missing from {location}: reinstall embedq "
            "(`pip install --force-reinstall embedq`)"
        )
    return location


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(script_location()))
    cfg.attributes["url"] = normalize_url(url)
    return cfg


def heads() -> tuple[str, ...]:
    """The head revisions of the scripts; one, unless a merge revision is missing."""
    return tuple(ScriptDirectory(str(script_location())).get_heads())


def upgrade(url: str, revision: str = "head") -> None:
    with map_db_errors(), _named(revision):
        command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    with map_db_errors(), _named(revision):
        command.downgrade(alembic_config(url), revision)


@contextlib.contextmanager
def _named(revision: str) -> Iterator[None]:
    """Alembic's refusal of a revision it cannot find or reach, said with the revisions
    there are (it ended `embedq db upgrade nonexistent` in a traceback)."""
    try:
        yield
    except CommandError as exc:
        scripts = ScriptDirectory(str(script_location()))
        known = [r.revision for r in scripts.walk_revisions()][::-1]
        raise ConfigError(f"revision {revision!r}: {exc}; give head, base or one of "
                          f"{', '.join(known)} (`embedq db current` shows the database's)"
                          ) from exc


def current(url: str) -> str | None:
    """The current revision(s), comma-joined when feature branches are not merged yet."""
    from alembic.runtime.migration import MigrationContext

    from embedq.models.engine import make_engine

    engine = make_engine(url)
    try:
        with map_db_errors(), engine.connect() as conn:
            revisions = MigrationContext.configure(conn).get_current_heads()
            return ",".join(sorted(revisions)) or None
    finally:
        engine.dispose()
