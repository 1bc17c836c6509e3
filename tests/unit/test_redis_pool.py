"""The Redis hot store's connection pool: callers past its size wait for a connection
instead of being refused, and a pool that stays exhausted says so (not "unreachable")."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from embedq.coordination.redis_link import map_redis_errors
from embedq.coordination.redis_store import RedisHotStore
from embedq.errors import BrokerUnavailable, EmbedqError
from tests import support


@pytest.fixture
def url() -> Iterator[str]:
    support.check_redis()
    support.flush_redis(support.SCRATCH_REDIS_URL)
    yield support.SCRATCH_REDIS_URL


def test_more_concurrent_callers_than_connections_all_get_served(url: str) -> None:
    store = RedisHotStore(url, socket_timeout_s=10)
    callers = 150  # above redis-py's default pool of 100, which refused the rest
    errors: list[BaseException] = []
    start = threading.Barrier(callers)

    def call(i: int) -> None:
        start.wait(10)
        try:
            with map_redis_errors():
                # Holds its connection ~50 ms on the server, as a slow command would.
                store.client.blpop([f"embedq-test-pool-{i}"], timeout=0.05)
        except EmbedqError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    store.close()
    assert not any(t.is_alive() for t in threads)
    assert errors == []


def test_an_exhausted_pool_says_so_and_blames_no_outage(url: str) -> None:
    store = RedisHotStore(url, socket_timeout_s=0.3, max_connections=1)
    holder = store.client.pubsub()
    holder.subscribe("embedq-test-pool-holder")  # keeps the only connection
    try:
        with pytest.raises(BrokerUnavailable) as caught:
            store.vectors(["x"])
    finally:
        holder.close()
        store.close()
    message = str(caught.value)
    assert "connections of this process stayed busy" in message
    assert "unreachable" not in message
    assert "retry" in message
