"""Fixtures for unit tests that run one body against every hot store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from embedq.coordination.memory import MemoryHotStore
from embedq.coordination.store import HotStore
from embedq.jobs.store import JobStore
from embedq.models import Database, migrate
from tests import support


@pytest.fixture
def job_store(tmp_path: Path) -> Iterator[JobStore]:
    """The jobs' tables in a SQLite file of the test's own, migrated as a deployment is."""
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    migrate.upgrade(url)
    db = Database(url)
    yield JobStore(db)
    db.engine.dispose()


@pytest.fixture(params=["memory", "redis", "cluster"])
def store(request: pytest.FixtureRequest) -> Iterator[HotStore]:
    """The same body against the in-process store, one Redis, and a Redis Cluster."""
    yield from open_store(request)


def open_store(request: pytest.FixtureRequest) -> Iterator[HotStore]:
    """The hot store `request.param` names (memory, redis, cluster), closed after."""
    if request.param == "memory":
        yield MemoryHotStore()
        return
    from embedq.coordination.redis_store import RedisHotStore

    if request.param == "cluster":
        cluster = request.getfixturevalue("redis_cluster")
        cluster.flush()
        url = cluster.url
    else:
        support.check_redis()
        support.flush_redis(support.SCRATCH_REDIS_URL)
        url = support.SCRATCH_REDIS_URL
    redis_store = RedisHotStore(url)
    yield redis_store
    redis_store.close()
