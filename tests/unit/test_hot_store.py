"""The in-process and Redis hot stores behave the same (one body, both stores)."""

from __future__ import annotations

import threading
import time

import pytest

from embedq.cache import keys
from embedq.cache.hot import HotStore
from tests import support


def test_vectors_round_trip_and_miss_as_none(store: HotStore) -> None:
    store.put_vectors({"a": b"\x00\x01", "b": b"\x02"}, ttl_s=60)
    assert store.get_vectors(["a", "zz", "b"]) == [b"\x00\x01", None, b"\x02"]


def test_claims_are_won_once_and_expire(store: HotStore) -> None:
    names = [keys.claim("x"), keys.claim("y")]
    assert store.acquire(names, "me", ttl_ms=300) == [True, True]
    assert store.acquire(names, "you", ttl_ms=300) == [False, False]
    assert store.holders(names) == ["me", "me"]
    store.release([names[0]], owner="you")
    assert store.holders(names)[0] == "me"
    store.release([names[0]], owner="me")
    assert store.holders(names)[0] is None
    time.sleep(0.4)  # outlive the 300 ms ttl: the expiry is what this checks
    assert store.acquire([names[1]], "you", ttl_ms=300) == [True]


def test_a_lease_is_not_taken_where_the_vector_is_already_stored(store: HotStore) -> None:
    leases = [keys.run_lease("done"), keys.run_lease("free"), keys.run_lease("held")]
    vectors = [keys.vector("done"), keys.vector("free"), keys.vector("held")]
    store.put_vectors({"done": b"\x07\x08"}, ttl_s=60)
    assert store.acquire([leases[2]], "other", ttl_ms=5000) == [True]
    got = store.acquire_unless(leases, vectors, "me", ttl_ms=5000)
    assert got == [b"\x07\x08", 0, None]
    # The stored fingerprint's lease stays free; only the free one is now held by "me".
    assert store.holders(leases) == [None, "me", "other"]


def test_a_lease_comes_with_the_count_of_the_runs_before_it(store: HotStore) -> None:
    fps = ["tried", "new", "held"]
    leases = [keys.run_lease(fp) for fp in fps]
    vectors = [keys.vector(fp) for fp in fps]
    store.add_attempts(["tried", "held"], ttl_s=60)
    store.add_attempts(["tried"], ttl_s=60)
    assert store.acquire([leases[2]], "other", ttl_ms=5000) == [True]
    got = store.acquire_unless(leases, vectors, "me", ttl_ms=5000,
                               counted=[keys.attempts(fp) for fp in fps])
    assert got == [2, 0, None]  # the held one's count is its runner's, not read here
    assert store.holders(leases) == ["me", "me", "other"]
    with pytest.raises(ValueError, match="one counter"):
        store.acquire_unless(leases, vectors, "me", ttl_ms=5000, counted=[keys.attempts("x")])


def test_attempts_count_up_and_clear(store: HotStore) -> None:
    assert store.add_attempts(["p", "q"], ttl_s=60) == [1, 1]
    assert store.add_attempts(["p"], ttl_s=60) == [2]
    assert store.peek_attempts(["p", "q", "r"]) == [2, 1, 0]
    store.clear_attempts(["p"])
    assert store.peek_attempts(["p"]) == [0]


def test_counters_accumulate(store: HotStore) -> None:
    store.incr({"encoded": 3, "batches": 1})
    store.incr({"encoded": 2})
    counters = store.counters()
    assert counters["encoded"] == 5 and counters["batches"] == 1 and counters["failed"] == 0


def heard(store: HotStore, fps: list[str], event: threading.Event) -> bool:
    """Publish `fps` once and say whether the listener setting `event` heard it."""
    store.publish_done(fps)
    return event.wait(0.1)


def test_done_notifications_reach_subscribers(store: HotStore) -> None:
    got: list[list[str]] = []
    seen = threading.Event()

    def listener(fps: list[str]) -> None:
        got.append(fps)
        seen.set()

    store.subscribe(listener)
    # Published until heard: the Redis listener subscribes in its own thread.
    support.wait_until(lambda: heard(store, ["f1", "f2"], seen), 5,
                       "a done notification reaching the subscriber")
    assert ["f1", "f2"] in got


def test_failures_round_trip(store: HotStore) -> None:
    store.put_failures({"bad": {"type": "InvalidVector", "message": "NaN"}}, ttl_s=60)
    assert store.get_failures(["bad", "good"]) == [
        {"type": "InvalidVector", "message": "NaN"}, None,
    ]


def test_outcomes_pair_vectors_and_failures(store: HotStore) -> None:
    store.put_vectors({"ok": b"\x01"}, ttl_s=60)
    store.put_failures({"bad": {"type": "InvalidVector", "message": "NaN"}}, ttl_s=60)
    assert store.get_outcomes(["ok", "bad", "none"]) == [
        (b"\x01", None), (None, {"type": "InvalidVector", "message": "NaN"}), (None, None),
    ]


def test_a_recorded_batch_stores_clears_releases_notifies_and_counts(store: HotStore) -> None:
    from embedq.cache.hot import BatchRecord

    got: list[list[str]] = []
    seen = threading.Event()
    listening = threading.Event()

    def listener(fps: list[str]) -> None:
        if "rb-probe" in fps:
            listening.set()
        if "rb-online" in fps:
            got.append(fps)
            seen.set()

    store.subscribe(listener)
    # The Redis listener subscribes in its own thread: probe until it hears.
    support.wait_until(lambda: heard(store, ["rb-probe"], listening), 5,
                       "the listener subscribing")
    store.add_attempts(["rb-online", "rb-bulk"], ttl_s=60)
    store.acquire([keys.claim("rb-online"), keys.claim("rb-bulk")], "worker", ttl_ms=60_000)
    before = store.counters()["encoded"]
    store.record_batch(BatchRecord(
        vectors=[({"rb-online": b"\x01"}, 60), ({"rb-bulk": b"\x02"}, 1)],
        clear_attempts=["rb-online", "rb-bulk"],
        release=[keys.claim("rb-online"), keys.claim("rb-bulk")],
        done=["rb-bulk", "rb-online"],
        counts={"encoded": 2, "batches": 1},
        observations={"batch_texts": 2.0},
    ))
    assert store.get_vectors(["rb-online", "rb-bulk"]) == [b"\x01", b"\x02"]
    assert store.peek_attempts(["rb-online", "rb-bulk"]) == [0, 0]
    assert store.holders([keys.claim("rb-online"), keys.claim("rb-bulk")]) == [None, None]
    assert store.counters()["encoded"] == before + 2
    assert store.histograms()["batch_texts"].count >= 1
    assert seen.wait(5) and got[-1] == ["rb-bulk", "rb-online"]
    time.sleep(1.2)  # outlive the bulk vector's 1 s ttl: the expiry is what this checks
    assert store.get_vectors(["rb-online", "rb-bulk"]) == [b"\x01", None]  # each its ttl


def test_a_won_claim_clears_its_own_key_and_a_lost_one_clears_nothing(store: HotStore) -> None:
    store.put_failures({"a": {"type": "X", "message": "old"},
                        "b": {"type": "X", "message": "old"}}, ttl_s=60)
    assert store.acquire([keys.claim("b")], "other", ttl_ms=5000) == [True]
    won = store.acquire_clearing([keys.claim("a"), keys.claim("b")],
                                 [keys.failure("a"), keys.failure("b")], "me", ttl_ms=5000)
    assert won == [True, False]
    assert store.get_failures(["a", "b"]) == [None, {"type": "X", "message": "old"}]
    assert store.holders([keys.claim("a"), keys.claim("b")]) == ["me", "other"]


def test_a_wanted_claim_clears_the_failure_of_what_it_won_and_registers_interest(
    store: HotStore,
) -> None:
    store.put_failures({"a": {"type": "X", "message": "old"},
                        "b": {"type": "X", "message": "old"}}, ttl_s=60)
    assert store.acquire([keys.claim("b")], "other", ttl_ms=5000) == [True]
    won = store.acquire_wanted([keys.claim("a"), keys.claim("b")], "me", 5000,
                               {"a": ["caller"], "b": ["caller"]}, 30_000,
                               clear=[keys.failure("a"), keys.failure("b")])
    assert won == [True, False]
    assert store.get_failures(["a", "b"]) == [None, {"type": "X", "message": "old"}]
    assert store.drop_unwanted([("a", "me"), ("b", "other")]) == []  # both still wanted
