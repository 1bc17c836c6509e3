"""Engines and sessions, with database errors translated at the boundary."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import ColumnElement, Engine, String, any_, bindparam, create_engine, event, inspect
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError, ProgrammingError
from sqlalchemy.orm import Session, sessionmaker

from embedq.errors import ConfigError, DatabaseUnavailable


def normalize_url(url: str) -> str:
    """Accept URLs as users write them: postgres://, postgresql://, sqlite:///path."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://"):]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://"):]
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigError(
            f"EMBEDQ_DATABASE_URL={url!r} is not a database URL: "
            "use postgresql://user@host/db or sqlite:///path/to/file.db"
        ) from exc
    if parsed.get_backend_name() not in {"postgresql", "sqlite"}:
        raise ConfigError(
            f"database {parsed.get_backend_name()!r} is not supported: use postgresql or sqlite"
        )
    return url


def make_engine(url: str) -> Engine:
    url = normalize_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):  # type: ignore[no-untyped-def]
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        return engine
    return create_engine(
        url,
        pool_size=10,
        max_overflow=20,
        pool_pre_ping=True,
        pool_recycle=1800,
        connect_args={"connect_timeout": 5},
    )


@contextlib.contextmanager
def map_db_errors() -> Iterator[None]:
    """Translate driver errors into embedq's: a down database is retryable, not a 500."""
    try:
        yield
    except OperationalError as exc:
        raise DatabaseUnavailable(
            f"the database is unreachable ({exc.orig.__class__.__name__}); retry shortly",
            retry_after_s=5,
        ) from exc
    except ProgrammingError as exc:
        if "does not exist" in str(exc) or "no such table" in str(exc):
            raise ConfigError(
                "the database has no embedq tables: run `embedq db upgrade`"
            ) from exc
        raise
    except DBAPIError as exc:
        if exc.connection_invalidated:
            raise DatabaseUnavailable("the database connection was lost; retry shortly") from exc
        raise


class Database:
    """One engine and session factory per process."""

    def __init__(self, url: str) -> None:
        self.url = normalize_url(url)
        self.engine = make_engine(self.url)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def among(self, column: Any, values: Sequence[str]) -> ColumnElement[bool]:
        """`column` is one of `values`: on Postgres `= ANY(array)`, one bound parameter
        (an IN list binds and renders every value, ~2x the client CPU at 2,048 values)."""
        if self.dialect == "postgresql":
            return column == any_(bindparam(None, list(values), type_=ARRAY(String)))  # type: ignore[no-any-return]
        return column.in_(list(values))  # type: ignore[no-any-return]

    @contextlib.contextmanager
    def session(self) -> Iterator[Session]:
        with map_db_errors(), self.sessions() as session, session.begin():
            yield session

    def has_tables(self, *names: str) -> bool:
        with map_db_errors():
            existing = set(inspect(self.engine).get_table_names())
        return set(names) <= existing

    def dispose(self) -> None:
        self.engine.dispose()
