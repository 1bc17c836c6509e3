"""The in-process memory tier: an LRU of finished vectors bounded by their bytes."""

from __future__ import annotations

import threading

from embedq.coordination.local_tier import LocalTier


def blob(n: int) -> bytes:
    return bytes([n % 256]) * 100


def test_a_held_vector_is_found_and_counted_as_a_hit() -> None:
    tier = LocalTier(10_000)
    tier.put_many({"a": blob(1)})
    assert tier.get_many(["a", "b"]) == {"a": blob(1)}
    stats = tier.stats()
    assert (stats["hits"], stats["misses"], stats["entries"], stats["bytes"]) == (1, 1, 1, 100)


def test_past_its_bound_the_least_recently_used_is_dropped_first() -> None:
    tier = LocalTier(300)  # three vectors of 100 bytes
    tier.put_many({"a": blob(1), "b": blob(2), "c": blob(3)})
    tier.get_many(["a"])  # a is now the most recently used
    tier.put_many({"d": blob(4)})
    assert set(tier.get_many(["a", "b", "c", "d"])) == {"a", "c", "d"}
    assert tier.stats()["bytes"] <= 300
    assert tier.stats()["evictions"] == 1


def test_putting_a_held_vector_again_does_not_count_its_bytes_twice() -> None:
    tier = LocalTier(1000)
    for _ in range(5):
        tier.put_many({"a": blob(1)})
    assert tier.stats()["bytes"] == 100


def test_a_vector_larger_than_the_bound_is_not_held() -> None:
    tier = LocalTier(50)
    tier.put_many({"a": blob(1)})
    assert tier.get_many(["a"]) == {}
    assert tier.stats()["entries"] == 0


def test_a_zero_bound_turns_the_tier_off() -> None:
    tier = LocalTier.of_mb(0)
    assert not tier.on
    tier.put_many({"a": blob(1)})
    assert tier.get_many(["a"]) == {}
    assert tier.stats()["misses"] == 0  # an off tier is not asked, so it counts nothing


def test_threads_putting_and_reading_keep_the_bound() -> None:
    tier = LocalTier(100 * 50)

    def work(base: int) -> None:
        for i in range(500):
            tier.put_many({f"{base}:{i}": blob(i)})
            tier.get_many([f"{base}:{i - 1}"])

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = tier.stats()
    assert stats["entries"] == 50 and stats["bytes"] == 5000
    assert stats["hits"] + stats["misses"] == 8 * 500
