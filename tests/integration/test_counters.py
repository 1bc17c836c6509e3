"""Request counters are written behind the answers, by one thread, merged: a request
never waits for its counters, and a reader in the same process sees every request it
made (`flush`)."""

from __future__ import annotations

import threading
import time

import pytest

from embedq.coordination import counters
from embedq.coordination.counters import CounterWriter
from embedq.coordination.redis_store import RedisHotStore

pytestmark = pytest.mark.integration


class GatedStore(RedisHotStore):
    """Redis, whose counter writes wait until `gate` is set."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.gate = threading.Event()
        self.writes = 0

    def incr(self, counts: dict[str, int]) -> None:
        self.gate.wait(10)
        self.writes += 1
        super().incr(counts)


def test_counts_from_many_threads_all_arrive_in_fewer_writes(redis_url: str) -> None:
    store = GatedStore(redis_url)
    writer = CounterWriter(store)
    assert writer.behind
    before = store.counters()["requests"]

    def requests() -> None:
        for _ in range(50):
            writer.add({"requests": 1, "texts": 2, "cache_hits": 0})

    threads = [threading.Thread(target=requests) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.gate.set()
    assert writer.flush(10)
    after = store.counters()
    assert after["requests"] - before == 400
    assert store.writes < 400  # merged while a write was waiting


def test_adding_does_not_wait_for_the_store(redis_url: str) -> None:
    store = GatedStore(redis_url)  # every write waits for the gate
    writer = CounterWriter(store)
    before = store.counters()["submitted"]
    started = time.monotonic()
    for _ in range(20):
        writer.add({"submitted": 1})
    assert time.monotonic() - started < 1  # no add waited on the held write
    assert not writer.flush(0.2)  # not written yet: the write is still held
    store.gate.set()
    assert writer.flush(10)
    assert store.counters()["submitted"] - before == 20


PACE = 0.25  # a pace long enough that no slow host can mistake it for a round trip


@pytest.fixture
def paced(redis_url: str, monkeypatch: pytest.MonkeyPatch
          ) -> tuple[GatedStore, CounterWriter]:
    """A writer on an open store, pacing its writes PACE apart."""
    monkeypatch.setattr(counters, "PACE_S", PACE)
    store = GatedStore(redis_url)
    store.gate.set()
    return store, CounterWriter(store)


def test_a_busy_process_writes_at_most_once_a_pace_and_a_reader_waits_for_none(
        paced: tuple[GatedStore, CounterWriter]) -> None:
    store, writer = paced
    before = store.counters()["requests"]
    started = time.monotonic()
    added = 0
    while time.monotonic() - started < 4 * PACE:  # a request every 0.5 ms
        writer.add({"requests": 1})
        added += 1
        time.sleep(0.0005)
    elapsed = time.monotonic() - started
    asked = time.monotonic()
    assert writer.flush(10)
    assert time.monotonic() - asked < PACE  # the reader did not wait out a pace
    assert store.counters()["requests"] - before == added
    assert store.writes <= elapsed / PACE + 2


def test_an_idle_process_writes_at_once_and_the_next_add_waits_a_pace(
        paced: tuple[GatedStore, CounterWriter]) -> None:
    store, writer = paced
    before = store.counters()["submitted"]
    writer.add({"submitted": 1})
    written = time.monotonic() + PACE * 0.8
    while store.counters()["submitted"] == before and time.monotonic() < written:
        time.sleep(0.002)
    assert store.counters()["submitted"] - before == 1  # no pace before the first
    writer.add({"submitted": 1})
    time.sleep(PACE / 4)
    assert store.counters()["submitted"] - before == 1  # paced: not yet
    assert writer.flush(10)
    assert store.counters()["submitted"] - before == 2
    assert store.writes == 2
