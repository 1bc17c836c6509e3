"""Postgres links are bounded: a slow statement, a busy lock and a silent link each end in
DatabaseUnavailable (retryable, HTTP 503) within their timeout, and the pool recovers."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url

from embedq.config import Settings
from embedq.errors import DatabaseUnavailable
from embedq.models.engine import Database, DbTimeouts
from embedq.models.vectors import PostgresVectors, StoredVector, open_vectors
from embedq.semantic.store import WRITE_LOCK_KEY, SemanticStore
from embedq.testing.processes import free_port
from tests.faults.silent_proxy import SilentProxy

pytestmark = pytest.mark.integration


@pytest.fixture
def db(pg_url: str) -> Iterator[Database]:
    database = Database(pg_url, DbTimeouts(connect_s=1, statement_ms=300, lock_ms=200))
    yield database
    database.dispose()


def test_a_statement_past_statement_timeout_is_database_unavailable(db: Database) -> None:
    with db.session() as s:
        assert s.scalar(text("SHOW statement_timeout")) == "300ms"
        assert s.scalar(text("SHOW lock_timeout")) == "200ms"
    started = time.monotonic()
    with pytest.raises(DatabaseUnavailable), db.session() as s:
        s.execute(text("SELECT pg_sleep(5)"))
    assert time.monotonic() - started < 2
    with db.session() as s:
        assert s.scalar(text("SELECT 1")) == 1


def test_a_busy_semantic_write_lock_is_a_clear_retryable_error(db: Database,
                                                               pg_url: str) -> None:
    holder = Database(pg_url)
    try:
        with holder.session() as s:
            s.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": WRITE_LOCK_KEY})
            started = time.monotonic()
            with pytest.raises(DatabaseUnavailable, match="write lock") as caught:
                SemanticStore(db).delete_entry("silent-ns", 1)
            assert time.monotonic() - started < 2
            assert caught.value.retryable
    finally:
        holder.dispose()


def test_a_silent_link_fails_the_statement_after_the_client_deadline(pg_url: str) -> None:
    url = make_url(pg_url)
    proxy = SilentProxy(url.host or "127.0.0.1", url.port or 5432).start()
    proxied = url.set(port=proxy.port).render_as_string(hide_password=False)
    database = Database(proxied, DbTimeouts(connect_s=1, statement_ms=500, lock_ms=200))
    try:
        with database.session() as s:
            assert s.scalar(text("SELECT 1")) == 1
        proxy.silence()
        for _ in range(2):  # the pooled connection, then a fresh one through the silence
            started = time.monotonic()
            with pytest.raises(DatabaseUnavailable), database.session() as s:
                s.execute(text("SELECT 1"))
            assert time.monotonic() - started < 1.5 + 1 + 2  # deadline + connect + margin
        proxy.resume()
        with database.session() as s:
            assert s.scalar(text("SELECT 1")) == 1
    finally:
        database.dispose()
        proxy.close()


def test_lookups_and_writes_survive_a_dropped_pooled_connection(pg_url: str) -> None:
    """The vector rows' engine has no ping before each use: a pooled connection the
    database dropped since (a restart, an idle-connection reaper) fails its statement,
    which is tried once more on a new connection, so no request sees the drop."""
    import psycopg

    store = PostgresVectors(pg_url, DbTimeouts(connect_s=2))
    try:
        row = StoredVector(f"fp-dropped-{time.time_ns()}", "m", "r", 2, b"\0" * 8)
        assert store.put_many([row]) == 1
        assert store.get_many([row.fingerprint]) == {row.fingerprint: row.vector}
        for attempt in ("lookup", "write"):
            with psycopg.connect(pg_url, autocommit=True) as admin:
                dropped = admin.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                ).fetchone()
            assert dropped is not None and dropped[0] >= 1  # the pooled connection
            if attempt == "lookup":
                assert store.get_many([row.fingerprint]) == {row.fingerprint: row.vector}
            else:
                again = StoredVector(row.fingerprint + "-2", "m", "r", 2, b"\1" * 8)
                assert store.put_many([again, row]) == 1  # only the new row is inserted
    finally:
        store.close()


def test_only_vector_statements_skip_the_wal_flush_wait(pg_url: str) -> None:
    def setting(vectors: PostgresVectors, database: Database) -> tuple[str, str]:
        # (the vector rows' session; any other session's)
        def show(conn: Connection) -> str:
            return str(conn.exec_driver_sql("SHOW synchronous_commit").scalar())

        with database.session() as s:
            other = str(s.scalar(text("SHOW synchronous_commit")))
        return vectors.run(show), other

    settings = Settings.from_env({"EMBEDQ_DATABASE_URL": pg_url,
                                  "EMBEDQ_VECTOR_SYNC_COMMIT": "1"})
    database = Database.from_settings(settings)
    default = open_vectors(database)
    strict = open_vectors(database, sync_commit=settings.links.vector_sync_commit)
    try:
        assert isinstance(default, PostgresVectors) and isinstance(strict, PostgresVectors)
        assert setting(default, database) == ("off", "on")
        assert setting(strict, database) == ("on", "on")
    finally:
        default.close()
        strict.close()
        database.dispose()


def test_vector_statements_leave_no_transaction_behind_on_a_pooled_connection(
        pg_url: str) -> None:
    """Vector statements run in autocommit from the connection's start, and their pool
    does not roll back on return: a statement that failed leaves no aborted transaction
    for the next statement on the same connection, and a write is visible at once."""
    def fail(conn: Connection) -> None:
        conn.exec_driver_sql("SELECT 1 / 0")

    def backend(conn: Connection) -> int:
        return int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar() or 0)

    def in_transaction(conn: Connection) -> bool:
        # Inside one transaction both statements see its id; in autocommit each statement
        # is a transaction of its own, with a new id.
        first = conn.exec_driver_sql("SELECT txid_current()").scalar()
        return bool(first == conn.exec_driver_sql("SELECT txid_current()").scalar())

    vectors = PostgresVectors(pg_url, DbTimeouts(connect_s=1, statement_ms=300, lock_ms=200))
    try:
        pid = vectors.run(backend)
        with pytest.raises(Exception, match="division by zero"):
            vectors.run(fail)
        assert vectors.run(backend) == pid  # the same pooled connection, usable
        assert vectors.run(in_transaction) is False
    finally:
        vectors.close()


REFUSED = [("database", "embedq_no_such_db", 'database "embedq_no_such_db" does not exist'),
           ("username", "embedq_no_such_role", 'role "embedq_no_such_role" does not exist')]


@pytest.mark.parametrize(("part", "value", "said"), REFUSED, ids=[p for p, _, _ in REFUSED])
def test_a_connection_refused_as_configured_logs_what_to_fix(
        pg_url: str, part: str, value: str, said: str, caplog: pytest.LogCaptureFixture) -> None:
    """A server that answers but will not take the connection as configured: the error
    stays the retryable one (an HTTP client's 503, without the server's names), and the
    log says what the URL got wrong."""
    wrong = make_url(pg_url).set(**{part: value}).render_as_string(hide_password=False)
    db = Database(wrong, DbTimeouts(connect_s=2))
    try:
        with caplog.at_level(logging.ERROR, logger="embedq.db"), \
                pytest.raises(DatabaseUnavailable) as caught, db.session() as s:
            s.execute(text("SELECT 1"))
        assert caught.value.retryable and value not in str(caught.value)
        assert f"the database refused the connection ({said})" in caplog.text
        assert "fix EMBEDQ_DATABASE_URL" in caplog.text
    finally:
        db.dispose()


def test_a_server_that_does_not_answer_is_only_retried(
        pg_url: str, caplog: pytest.LogCaptureFixture) -> None:
    silent = make_url(pg_url).set(port=free_port()).render_as_string(hide_password=False)
    db = Database(silent, DbTimeouts(connect_s=2))
    try:
        with caplog.at_level(logging.ERROR, logger="embedq.db"), \
                pytest.raises(DatabaseUnavailable, match="retry shortly"), db.session() as s:
            s.execute(text("SELECT 1"))
        assert "refused the connection" not in caplog.text
    finally:
        db.dispose()
