"""Fixtures for unit tests that run one body against both hot stores."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from embedq.coordination.memory import MemoryHotStore
from embedq.coordination.store import HotStore
from tests import support


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> Iterator[HotStore]:
    if request.param == "memory":
        yield MemoryHotStore()
        return
    support.check_redis()
    from embedq.coordination.redis_store import RedisHotStore

    support.flush_redis(support.REDIS_URL)
    redis_store = RedisHotStore(support.REDIS_URL)
    yield redis_store
    redis_store.close()
