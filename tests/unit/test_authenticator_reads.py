"""The authenticator reads an expired answer once, however many requests ask for it at
the same time: they wait for that read's outcome, the principal or the error, instead of
each querying the key store (embedq.tenants.authenticator._SharedReads)."""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
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
from embedq.tenants.authenticator import _SharedReads
from tests.support import wait_until

CALLERS = 16


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    settings = Settings.from_env({"EMBEDQ_DATA_DIR": str(tmp_path)})
    upgrade(settings.resolved_database_url)
    database = Database(settings.resolved_database_url)
    yield database
    database.dispose()


def _inside_a_shared_read() -> int:
    """How many threads are inside the authenticator's shared read (running it, or
    waiting for its outcome)."""
    return sum(
        1 for frame in sys._current_frames().values()
        if any(f.f_code is _SharedReads.read.__code__ for f, _ in traceback.walk_stack(frame)))


@dataclass
class KeyReads:
    """The key-table queries the store ran (`seen`). Each waits until `callers` threads
    are inside the shared read before it answers (a slow database, as the callers see
    it); where the callers each read for themselves, that never happens and the wait
    fails the query. With `fail`, each fails as a database that went away does."""

    seen: list[str] = field(default_factory=list)
    callers: int = CALLERS
    fail: bool = False

    def watch(self, db: Database) -> KeyReads:
        @event.listens_for(db.engine, "before_cursor_execute")
        def _read(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            if "api_keys" not in statement:
                return
            self.seen.append(statement)
            wait_until(lambda: _inside_a_shared_read() == self.callers, 10,
                       f"{self.callers} callers inside the one read")
            if self.fail:
                raise OperationalError(statement, {}, Exception("the database went away"))

        return self


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
    reads = KeyReads().watch(db)
    found = _at_once(lambda: authenticator.authenticate(key))
    assert len(reads.seen) == 1, reads.seen
    assert all(p is not None and p.tenant == "acme" for p in found), found
    assert _at_once(authenticator.required) == [True] * CALLERS
    assert len(reads.seen) == 2  # the set of keys, read once too


def test_callers_share_the_failure_of_the_read_they_waited_for(db: Database) -> None:
    store = KeyStore(db)
    key = store.create("acme", "indexer", "embed").key
    authenticator = Authenticator((), store, ttl_s=0.0)
    reads = KeyReads(fail=True).watch(db)
    failed = _at_once(lambda: authenticator.authenticate(key))
    assert all(isinstance(f, Unavailable) for f in failed), failed
    assert len(reads.seen) == 1, reads.seen  # one failed read, not one a caller
    reads.callers, reads.fail = 1, False
    assert authenticator.authenticate(key) is not None  # the next read runs again
    assert len(reads.seen) == 2
