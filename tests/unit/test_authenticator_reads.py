"""The authenticator reads an expired answer once, however many requests ask for it at
the same time: they wait for that read's outcome, the principal or the error, instead of
each querying the key store (embedq.tenants.authenticator._SharedReads)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.exc import OperationalError

from embedq.config import Settings
from embedq.errors import Unavailable
from embedq.models import Database
from embedq.models.migrate import upgrade
from embedq.tenants import Authenticator, KeyStore

CALLERS = 16


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    settings = Settings.from_env({"EMBEDQ_DATA_DIR": str(tmp_path)})
    upgrade(settings.resolved_database_url)
    database = Database(settings.resolved_database_url)
    yield database
    database.dispose()


def _key_reads(db: Database, slow_s: float, fail: threading.Event | None = None
               ) -> list[str]:
    """The key-table queries the store runs from now on. Each is a slow query: held
    `slow_s`, far longer than the callers released together take to arrive, so that they
    all ask while it runs (the hold is the database under test, not a wait for an
    outcome). With `fail` set, each fails as a database that went away does."""
    seen: list[str] = []

    @event.listens_for(db.engine, "before_cursor_execute")
    def _read(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "api_keys" not in statement:
            return
        seen.append(statement)
        time.sleep(slow_s)
        if fail is not None and fail.is_set():
            raise OperationalError(statement, {}, Exception("the database went away"))

    return seen


def _at_once(call: Callable[[], Any]) -> list[Any]:
    """`call` from CALLERS threads released together: each one's value or exception."""
    start = threading.Barrier(CALLERS)

    def one() -> Any:
        start.wait()
        try:
            return call()
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(CALLERS) as pool:
        return list(pool.map(lambda _: one(), range(CALLERS)))


def test_concurrent_lookups_of_one_key_read_the_store_once(db: Database) -> None:
    store = KeyStore(db)
    key = store.create("acme", "indexer", "embed").key
    authenticator = Authenticator((), store, ttl_s=0.5)
    reads = _key_reads(db, slow_s=0.5)
    found = _at_once(lambda: authenticator.authenticate(key))
    assert len(reads) == 1, reads
    assert all(p is not None and p.tenant == "acme" for p in found), found
    assert _at_once(authenticator.required) == [True] * CALLERS
    assert len(reads) == 2  # the set of keys, read once too


def test_callers_share_the_failure_of_the_read_they_waited_for(db: Database) -> None:
    store = KeyStore(db)
    key = store.create("acme", "indexer", "embed").key
    authenticator = Authenticator((), store, ttl_s=0.0)
    down = threading.Event()
    down.set()
    reads = _key_reads(db, slow_s=1.0, fail=down)
    failed = _at_once(lambda: authenticator.authenticate(key))
    assert all(isinstance(f, Unavailable) for f in failed), failed
    assert len(reads) == 1, reads  # one failed read, not one a caller
    down.clear()
    assert authenticator.authenticate(key) is not None  # the next read runs again
    assert len(reads) == 2
