"""The in-process and Redis hot stores behave the same (one body, both stores)."""

from __future__ import annotations

import hashlib
import threading
import time

import pytest

from embedq.coordination import layout
from embedq.coordination.redis_store import RedisHotStore
from embedq.coordination.store import BatchRecord, Hold, HotStore, Interest
from tests import support

FAILED = {"type": "InvalidVector", "message": "NaN"}


def test_vectors_round_trip_and_miss_as_none(store: HotStore) -> None:
    store.put_vectors({"a": b"\x00\x01", "b": b"\x02"}, ttl_s=60)
    assert store.vectors(["a", "zz", "b"]) == [b"\x00\x01", None, b"\x02"]


def test_claims_are_won_once_and_expire(store: HotStore) -> None:
    assert store.claim(["x", "y"], "me", ttl_ms=300).won == ["x", "y"]
    assert store.claim(["x", "y"], "you", ttl_ms=300).lost == ["x", "y"]
    assert store.holders(Hold.CLAIM, ["x", "y"]) == ["me", "me"]
    store.release(Hold.CLAIM, ["x"], owner="you")
    assert store.holders(Hold.CLAIM, ["x"]) == ["me"]
    store.release(Hold.CLAIM, ["x"], owner="me")
    assert store.holders(Hold.CLAIM, ["x"]) == [None]
    time.sleep(0.4)  # outlive the 300 ms ttl: the expiry is what this checks
    assert store.claim(["y"], "you", ttl_ms=300).won == ["y"]


def test_the_owner_of_a_claim_wins_it_again_with_a_new_ttl(store: HotStore) -> None:
    """A redelivered chunk claims under its own id: its earlier run's claims are its."""
    store.claim(["mine"], "chunk-1", ttl_ms=300)
    again = store.claim(["mine"], "chunk-1", ttl_ms=60_000)
    assert (again.won, again.lost) == (["mine"], [])
    time.sleep(0.4)  # past the first ttl: the second one holds it
    assert store.holders(Hold.CLAIM, ["mine"]) == ["chunk-1"]


def test_a_lease_is_not_taken_where_the_vector_is_already_stored(store: HotStore) -> None:
    store.put_vectors({"done": b"\x07\x08"}, ttl_s=60)
    assert store.lease(["held"], "other", ttl_ms=5000).won == {"held": 0}
    got = store.lease(["done", "free", "held"], "me", ttl_ms=5000)
    assert (got.stored, got.won, got.held) == ({"done": b"\x07\x08"}, {"free": 0}, ["held"])
    # The stored fingerprint's lease stays free; only the free one is now held by "me".
    assert store.holders(Hold.LEASE, ["done", "free", "held"]) == [None, "me", "other"]


def test_a_lease_comes_with_the_count_of_the_runs_before_it(store: HotStore) -> None:
    store.count_attempts(["tried", "held"], ttl_s=60)
    store.count_attempts(["tried"], ttl_s=60)
    store.lease(["held"], "other", ttl_ms=5000)
    got = store.lease(["tried", "new", "held"], "me", ttl_ms=5000)
    assert got.won == {"tried": 2, "new": 0} and got.held == ["held"]
    assert store.holders(Hold.LEASE, ["tried", "new", "held"]) == ["me", "me", "other"]


def test_leases_extend_and_release_by_owner(store: HotStore) -> None:
    store.lease(["l1"], "me", ttl_ms=300)
    store.extend_leases(["l1"], ttl_ms=60_000)
    time.sleep(0.4)  # past the first ttl: the extension holds it
    store.release(Hold.LEASE, ["l1"], owner="someone-else")
    assert store.holders(Hold.LEASE, ["l1"]) == ["me"]
    store.release(Hold.LEASE, ["l1"], owner="me")
    assert store.holders(Hold.LEASE, ["l1"]) == [None]


def test_attempts_count_up_and_are_forgotten(store: HotStore) -> None:
    assert store.count_attempts(["p", "q"], ttl_s=60) == [1, 1]
    assert store.count_attempts(["p"], ttl_s=60) == [2]
    assert store.attempts(["p", "q", "r"]) == [2, 1, 0]
    store.forget_attempts(["p"])
    assert store.attempts(["p"]) == [0]


def test_counters_accumulate(store: HotStore) -> None:
    store.incr({"encoded": 3, "batches": 1})
    store.incr({"encoded": 2})
    counters = store.counters()
    assert counters["encoded"] == 5 and counters["batches"] == 1 and counters["failed"] == 0


def heard(store: HotStore, fps: list[str], event: threading.Event) -> bool:
    """Announce `fps` once and say whether the listener setting `event` heard it."""
    store.record_batch(BatchRecord(done=fps))
    return event.wait(0.1)


def test_a_stopping_worker_takes_its_heartbeat_back(store: HotStore) -> None:
    store.heartbeat("w-stays", {"model": "m"}, ttl_s=60)
    store.heartbeat("w-stops", {"model": "m"}, ttl_s=60)
    store.forget_worker("w-stops")
    store.forget_worker("w-never-was")  # nothing to drop: no error
    live = store.live_workers()
    assert "w-stops" not in live and live["w-stays"] == {"model": "m"}


def test_done_notifications_reach_subscribers(store: HotStore) -> None:
    got: list[list[str]] = []
    seen = threading.Event()

    def listener(fps: list[str]) -> None:
        got.append(fps)
        seen.set()

    store.subscribe(listener)

    def ours_heard() -> bool:
        # Published until heard: the Redis listener subscribes in its own thread, and
        # other processes' notifications on the same channel are not ours.
        heard(store, ["f1", "f2"], seen)
        # A batch may arrive in parts (on a cluster, one per bucket of hash slots).
        return {"f1", "f2"} <= {fp for part in got for fp in part}

    support.wait_until(ours_heard, 5, "a done notification reaching the subscriber")


def test_settled_tells_vectors_failures_and_pending_apart(store: HotStore) -> None:
    store.record_batch(BatchRecord(vectors=[({"ok": b"\x01"}, 60)], failures={"bad": FAILED}))
    got = store.settled(["ok", "bad", "none"])
    assert (got.vectors, got.failures, got.pending) == ({"ok": b"\x01"}, {"bad": FAILED},
                                                         ["none"])


def test_a_recorded_batch_stores_forgets_frees_notifies_and_counts(store: HotStore) -> None:
    got: list[list[str]] = []
    seen = threading.Event()
    listening = threading.Event()

    def listener(fps: list[str]) -> None:
        if "rb-probe" in fps:
            listening.set()
        got.append(fps)
        if {"rb-bad", "rb-bulk", "rb-online"} <= {fp for part in got for fp in part}:
            seen.set()

    store.subscribe(listener)
    # The Redis listener subscribes in its own thread: probe until it hears.
    support.wait_until(lambda: heard(store, ["rb-probe"], listening), 5,
                       "the listener subscribing")
    fps = ["rb-online", "rb-bulk", "rb-bad"]
    store.count_attempts(fps, ttl_s=60)
    store.claim(fps, "worker", ttl_ms=60_000)
    before = store.counters()
    store.record_batch(BatchRecord(
        vectors=[({"rb-online": b"\x01"}, 60), ({"rb-bulk": b"\x02"}, 1)],
        failures={"rb-bad": FAILED}, failure_ttl_s=60,
        forget_attempts=fps, free_claims=fps, done=["rb-bad", "rb-bulk", "rb-online"],
        counts={"encoded": 2, "batches": 1, "failed": 1},
        observations=[{"batch_texts": 2.0}],
    ))
    assert store.vectors(["rb-online", "rb-bulk"]) == [b"\x01", b"\x02"]
    assert store.settled(["rb-bad"]).failures == {"rb-bad": FAILED}
    assert store.attempts(fps) == [0, 0, 0]
    assert store.holders(Hold.CLAIM, fps) == [None, None, None]
    after = store.counters()
    assert (after["encoded"], after["failed"]) == (before["encoded"] + 2, before["failed"] + 1)
    assert store.histograms()["batch_texts"].count >= 1
    assert seen.wait(5)  # each announced fingerprint heard, in one part or several
    time.sleep(1.2)  # outlive the bulk vector's 1 s ttl: the expiry is what this checks
    assert store.vectors(["rb-online", "rb-bulk"]) == [b"\x01", None]  # each its ttl


def test_a_won_claim_clears_the_failure_it_replaces_and_a_lost_one_clears_nothing(
        store: HotStore) -> None:
    store.claim(["b"], "other", ttl_ms=5000)
    store.record_batch(BatchRecord(failures={"a": FAILED, "b": FAILED}))
    claimed = store.claim(["a", "b"], "me", ttl_ms=5000)
    assert (claimed.won, claimed.lost) == (["a"], ["b"])
    assert store.settled(["a", "b"]).failures == {"b": FAILED}
    assert store.holders(Hold.CLAIM, ["a", "b"]) == ["me", "other"]


def test_a_claim_registers_interest_for_won_and_lost_fingerprints(store: HotStore) -> None:
    store.claim(["b"], "other", ttl_ms=5000)
    store.claim(["a", "b"], "me", 5000, Interest({"a": ["caller"], "b": ["caller"]}, 30_000))
    assert store.drop_unwanted([("a", "me"), ("b", "other")]) == []  # both still wanted


def test_interest_needs_a_positive_ttl(store: HotStore) -> None:
    with pytest.raises(ValueError, match="ttl"):
        store.claim(["a"], "me", 5000, Interest({"a": ["caller"]}, 0))


def test_bulk_vectors_get_a_hot_copy_only_where_a_caller_waits(store: HotStore) -> None:
    """`wanted` vectors: those with interest registered are stored hot, the rest are not
    (nor, on Redis, sent); plain `vectors` are stored either way."""
    store.claim(["w1"], "chunk", 5000, Interest({"w1": ["caller"]}, 30_000))
    store.claim(["w2", "nobody"], "chunk", 5000, Interest({"w2": ["caller-2"]}, 30_000))
    store.record_batch(BatchRecord(
        vectors=[({"online": b"\x01"}, 60)],
        wanted={"nobody": b"\x02", "w1": b"\x03", "w2": b"\x04", "also-nobody": b"\x05"},
        wanted_ttl_s=60, free_claims=["w1", "w2", "nobody"], done=["w1", "w2", "nobody"]))
    assert store.vectors(["online", "nobody", "w1", "w2", "also-nobody"]) == \
        [b"\x01", None, b"\x03", b"\x04", None]
    assert store.holders(Hold.CLAIM, ["w1", "w2", "nobody"]) == [None, None, None]


def test_a_heartbeat_past_its_ttl_is_not_live_and_is_dropped(store: HotStore) -> None:
    store.heartbeat("gone", {"model": "m"}, 0)
    store.heartbeat("here", {"model": "m"}, 60)
    assert set(store.live_workers()) == {"here"}
    if isinstance(store, RedisHotStore):
        assert store.client.hkeys(layout.WORKERS) == [b"here"]


def test_a_heartbeat_rewritten_after_it_was_read_stale_is_kept() -> None:
    support.check_redis()
    support.flush_redis(support.SCRATCH_REDIS_URL)
    redis_store = RedisHotStore(support.SCRATCH_REDIS_URL)
    redis_store.heartbeat("w", {"model": "m"}, 0)
    stale = redis_store.client.hget(layout.WORKERS, "w")
    redis_store.heartbeat("w", {"model": "m"}, 60)  # the worker beat again meanwhile
    assert redis_store._run("drop_stale", [layout.WORKERS], ["w", stale]) == 0
    # Only this heartbeat's fate is asserted: a worker beating into the same db between
    # the flush above and this read (the session's did, before these tests had a db of
    # their own) changes nothing here.
    assert "w" in set(redis_store.live_workers())
    assert redis_store.client.hget(layout.WORKERS, "w") != stale
    redis_store.close()


@pytest.mark.parametrize("store", ["redis", "cluster"], indirect=True)
def test_the_scripts_form_the_key_names_of_the_layout(store: HotStore) -> None:
    """The scripts over many fingerprints take a prefix per kind and the fingerprints
    packed, and form the names themselves: exactly `layout`'s, in each fingerprint's
    bucket, and nothing else."""
    assert isinstance(store, RedisHotStore)
    fps = [hashlib.sha256(f"layout {i}".encode()).hexdigest() for i in range(40)]
    store.claim(fps, "chunk", 60_000, Interest({fps[0]: ["caller"]}, 60_000))
    # Only the one with interest is sent: fps[1]'s vector is not, so its lease is taken.
    store.record_batch(BatchRecord(wanted={fps[0]: b"\x01", fps[1]: b"\x02"}, wanted_ttl_s=60))
    leased = store.lease(fps, "worker", 60_000)
    assert (leased.stored, leased.won) == ({fps[0]: b"\x01"}, dict.fromkeys(fps[1:], 0))
    assert store.count_attempts(fps[1:], 60) == [1] * 39
    expected = {layout.claim(fp, store.buckets.tag(fp)) for fp in fps}
    expected |= {layout.run_lease(fp, store.buckets.tag(fp)) for fp in fps[1:]}
    expected |= {layout.attempts(fp, store.buckets.tag(fp)) for fp in fps[1:]}
    expected |= {layout.interest(fps[0], store.buckets.tag(fps[0]))}
    expected |= {layout.vector(fps[0], store.buckets.tag(fps[0]))}
    client = store.client
    keys = (client.keys("embedq:*", target_nodes=client.PRIMARIES) if store.cluster
            else client.keys("embedq:*"))
    names = {k.decode() for k in keys if not k.endswith(b":stats")}
    assert names == expected
    store.release(Hold.LEASE, fps[1:20], "worker")
    store.release(Hold.LEASE, fps[20:22], "someone else")
    store.release(Hold.CLAIM, fps[:10])
    store.record_batch(BatchRecord(forget_attempts=fps[1:30]))
    assert store.holders(Hold.LEASE, fps[18:22]) == [None, None, "worker", "worker"]
    assert store.holders(Hold.CLAIM, fps[8:12]) == [None, None, "chunk", "chunk"]
    assert store.attempts(fps[28:32]) == [0, 0, 1, 1]


@pytest.mark.parametrize("bad", ["", "a,b"])
def test_a_fingerprint_that_would_shift_the_packed_replies_is_refused(bad: str) -> None:
    assert layout.packed(["ab", "cd"]) == "ab,cd" and layout.packed([]) == ""
    with pytest.raises(ValueError, match="hex digests"):
        layout.packed(["ab", bad, "cd"])
