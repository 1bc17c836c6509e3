"""Engines and sessions, with database errors translated at the boundary.

Every Postgres link is bounded (`DbTimeouts`): a connect timeout, TCP keepalives and a
TCP user timeout (a peer that stops acknowledging is dropped), server-side
`statement_timeout` and `lock_timeout`, and a client-side deadline on every wait for the
server, for a link that goes silent while the server never saw the statement. Past any of
them the caller gets `DatabaseUnavailable` (retryable, HTTP 503), never a hang.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from sqlalchemy import (
    ColumnElement,
    Engine,
    String,
    any_,
    bindparam,
    create_engine,
    event,
    inspect,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError, ProgrammingError
from sqlalchemy.orm import Session, sessionmaker

from embedq.errors import ConfigError, DatabaseUnavailable

log = logging.getLogger("embedq.db")

if TYPE_CHECKING:
    from embedq.config import Settings


@dataclass(frozen=True)
class DbTimeouts:
    """How long a Postgres link may stay silent (0 turns a server-side timeout off), and
    how many links a pool keeps open (`pool_size`) and opens beyond that under load."""

    connect_s: int = 5
    statement_ms: int = 30_000
    lock_ms: int = 10_000
    keepalive_idle_s: int = 30
    pool_size: int = 10
    max_overflow: int = 20

    @classmethod
    def from_settings(cls, settings: Settings) -> DbTimeouts:
        links = settings.links
        return cls(links.db_connect_timeout_s, links.db_statement_timeout_ms,
                   links.db_lock_timeout_ms, links.db_keepalive_idle_s, links.db_pool_size,
                   links.db_max_overflow)

    @property
    def answer_deadline_s(self) -> float | None:
        """How long the client waits for any answer: the statement's own timeout, then one
        connect timeout for the server's error to arrive. None: no statement timeout."""
        return self.statement_ms / 1000 + self.connect_s if self.statement_ms else None

    def connect_args(self, server: dict[str, str] | None = None) -> dict[str, Any]:
        """libpq parameters: TCP keepalives probe an idle link (idle, then 3 probes a third
        of that apart); tcp_user_timeout drops one whose sent data goes unacknowledged;
        the timeouts and `server`'s settings as the session's options."""
        interval_s = max(1, self.keepalive_idle_s // 3)
        args: dict[str, Any] = {
            "connect_timeout": self.connect_s,
            "keepalives": 1,
            "keepalives_idle": self.keepalive_idle_s,
            "keepalives_interval": interval_s,
            "keepalives_count": 3,
            "tcp_user_timeout": (self.keepalive_idle_s + 3 * interval_s) * 1000,
        }
        options = [f"-c {name}={ms}" for name, ms in
                   (("statement_timeout", self.statement_ms), ("lock_timeout", self.lock_ms))
                   if ms]
        options += [f"-c {name}={value}" for name, value in (server or {}).items()]
        if options:
            args["options"] = " ".join(options)
        return args


class BoundedConnection(psycopg.Connection[Any]):
    """A psycopg connection that stops waiting for the server after `answer_deadline_s`.

    statement_timeout is enforced by the server; when the link drops packets the server
    never sees the statement (or its answer never arrives), and libpq would wait forever.
    Past the deadline the connection is closed (its state is unknown) and the wait raises
    OperationalError, which the pool treats as a disconnect."""

    answer_deadline_s: float | None = None

    def wait(self, gen: Generator[Any, Any, Any], interval: float = 0.1,
             timeout: float | None = None) -> Any:
        if timeout is not None or self.answer_deadline_s is None:
            return super().wait(gen, interval, timeout)
        try:
            return super().wait(gen, interval, self.answer_deadline_s)
        except psycopg.errors.OperationalError as exc:
            if type(exc).__name__ != "_WaitTimeout":
                raise
            self.pgconn.finish()
            raise psycopg.errors.OperationalError(
                f"no answer from the database within {self.answer_deadline_s:g}s "
                "(the link is silent)"
            ) from exc


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


def make_engine(url: str, timeouts: DbTimeouts | None = None, *, pre_ping: bool = True,
                server: dict[str, str] | None = None, autocommit: bool = False) -> Engine:
    """An engine for `url`. Postgres links get `timeouts`; None: connect timeout and
    keepalives only, no statement or lock timeout (migrations may run long). `pre_ping`:
    a round trip before each checkout finds connections the database dropped (False: the
    caller retries on one, `PostgresVectors.run`). `server`: Postgres settings for every
    session of the engine (name -> value). `autocommit` (Postgres): every connection is
    in autocommit from its start, so no transaction is ever left to roll back when one
    goes back to the pool (an engine switched per checkout instead sets and resets the
    mode and rolls back each time: a third of a one-row lookup's client time)."""
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
            # A checkpoint runs in the thread whose commit passes this many WAL pages (the
            # vector writer's, in a job): at SQLite's 1,000 an embedded job's writes spent
            # about 15% of their time copying pages back; at 10,000 pages (about 40 MB of
            # WAL) a page written many times between checkpoints is copied once.
            cur.execute(f"PRAGMA wal_autocheckpoint={SQLITE_CHECKPOINT_PAGES}")
            cur.close()

        return engine
    bounds = timeouts or DbTimeouts(statement_ms=0, lock_ms=0)
    engine = create_engine(
        url,
        pool_size=bounds.pool_size,
        max_overflow=bounds.max_overflow,
        pool_pre_ping=pre_ping,
        pool_recycle=1800,
        connect_args=bounds.connect_args(server),
        **({"isolation_level": "AUTOCOMMIT", "pool_reset_on_return": None}
           if autocommit else {}),
    )
    connection_class: type[BoundedConnection] = type(
        "BoundedConnection", (BoundedConnection,), {"answer_deadline_s": bounds.answer_deadline_s})

    @event.listens_for(engine, "do_connect")
    def _bounded(_dialect, _record, cargs, cparams):  # type: ignore[no-untyped-def]
        return connection_class.connect(*cargs, **cparams)

    return engine


NO_TABLES = "the database has no embedq tables: run `embedq db upgrade`"


@contextlib.contextmanager
def map_db_errors() -> Iterator[None]:
    """Translate driver errors into embedq's: a down database is retryable, not a 500."""
    try:
        yield
    except OperationalError as exc:
        if "no such table" in str(exc.orig):  # SQLite says it as an OperationalError
            raise ConfigError(NO_TABLES) from exc
        _say_refusal(exc.orig)
        raise DatabaseUnavailable(
            f"the database is unreachable ({exc.orig.__class__.__name__}); retry shortly",
            retry_after_s=5,
        ) from exc
    except ProgrammingError as exc:
        if "does not exist" in str(exc) or "no such table" in str(exc):
            raise ConfigError(NO_TABLES) from exc
        raise
    except DBAPIError as exc:
        if exc.connection_invalidated:
            raise DatabaseUnavailable("the database connection was lost; retry shortly") from exc
        raise
    except psycopg.OperationalError as exc:  # the driver's own calls (COPY) under a session
        _say_refusal(exc)
        raise DatabaseUnavailable(
            f"the database is unreachable ({exc.__class__.__name__}); retry shortly",
            retry_after_s=5,
        ) from exc


# What a server that answers says when it will not take the connection as configured: no
# retry mends these, the URL or the server's set-up does.
_REFUSALS = re.compile(r"FATAL:\s+((?:database|role) \"[^\"]*\" does not exist|password "
                       r"authentication failed[^\n]*|no pg_hba\.conf entry[^\n]*)")


def _say_refusal(exc: BaseException | None) -> None:
    """Log why the server refused the connection, when it is the configuration's doing
    ("database "x" does not exist"): the error raised stays the retryable
    DatabaseUnavailable an HTTP client gets as 503 without the server's names in it, and
    the log (a CLI's stderr, a server's log) says what to fix."""
    found = _REFUSALS.search(str(exc or ""))
    if found is not None:
        log.error("the database refused the connection (%s): fix EMBEDQ_DATABASE_URL, or "
                  "create what it names (a database: createdb NAME, then `embedq db "
                  "upgrade`)", found.group(1).strip())


SQLITE_CHECKPOINT_PAGES = 10_000  # see make_engine's SQLite pragmas


def copy_rows(raw: psycopg.Connection[Any], target: str, types: Sequence[str],
              rows: Iterable[tuple[Any, ...]]) -> None:
    """`rows` into `target` (a table and its column list) by binary COPY on a driver
    connection, in whatever transaction it is in."""
    with raw.cursor().copy(f"COPY {target} FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(list(types))
        for row in rows:
            copy.write_row(row)


class Database:
    """One engine and session factory per process (the vector rows, on every request's
    path, have an engine of their own: `embedq.models.vectors`)."""

    def __init__(self, url: str, timeouts: DbTimeouts | None = None) -> None:
        self.url = normalize_url(url)
        self.timeouts = timeouts or DbTimeouts()
        self.engine = make_engine(self.url, self.timeouts)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> Database:
        """The database `settings` name, with their timeouts on every link."""
        return cls(settings.resolved_database_url, DbTimeouts.from_settings(settings))

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
