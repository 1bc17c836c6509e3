"""Alembic environment: the URL comes from embedq (`embedq db upgrade`), never from a file."""

from __future__ import annotations

from alembic import context
from sqlalchemy import pool

from embedq.models import Base
from embedq.models.engine import make_engine

config = context.config
url = config.attributes.get("url") or config.get_main_option("sqlalchemy.url")


def run() -> None:
    if context.is_offline_mode():
        context.configure(url=url, target_metadata=Base.metadata, literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(url)
    engine.pool = pool.NullPool(engine.pool._creator)  # type: ignore[attr-defined]
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
