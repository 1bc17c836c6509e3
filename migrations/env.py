"""Alembic environment: the URL comes from embedq (`embedq db upgrade`), never from a file."""

from __future__ import annotations

from alembic import context

from embedq.models import Base
from embedq.models.engine import make_engine

config = context.config
url: str = config.attributes.get("url") or config.get_main_option("sqlalchemy.url") or ""
if not url:
    raise SystemExit("no database URL: run migrations with `embedq db upgrade`, which sets it "
                     "from EMBEDQ_DATABASE_URL")


def run() -> None:
    if context.is_offline_mode():
        context.configure(url=url, target_metadata=Base.metadata, literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    # embedq's own engine, pool untouched: a pool swapped in here would skip the dialect's
    # first-connect set-up (SQLite batch migrations then fail reflecting a table).
    engine = make_engine(url)
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=Base.metadata,
            render_as_batch=connection.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


run()
