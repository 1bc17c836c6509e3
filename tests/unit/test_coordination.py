"""Outcomes and waits (embedq.coordination), on the in-process and the Redis store."""

from __future__ import annotations

import threading
import time

import pytest

from embedq.coordination.memory import MemoryHotStore
from embedq.coordination.outcomes import publish_failures, publish_vectors, read_outcomes
from embedq.coordination.store import BatchRecord, Hold, HotStore, Settled, encode_failure
from embedq.coordination.waiting import CHUNK, REDELIVERY, REQUEST, Waiting, WaitPolicy
from embedq.errors import BrokerUnavailable, EmbeddingFailed, PoisonText, UpstreamError
from embedq.models.vectors import StoredVector, VectorStore

ONE = b"\x00\x00\x80\x3f"
FAST = WaitPolicy(Hold.CLAIM, poll_s=0.01, check_s=0.0, durable=True, ride_out_outages=False)


def test_a_new_claim_clears_the_failure_an_earlier_computation_left(store: HotStore) -> None:
    publish_failures(store, {"fp1": EmbeddingFailed("transient")}, ttl_s=300)
    assert "fp1" in read_outcomes(store, ["fp1"])[1]
    claimed = store.claim(["fp1"], "req-2", ttl_ms=5000)
    assert (claimed.won, claimed.lost) == (["fp1"], [])
    assert read_outcomes(store, ["fp1"]) == ({}, {}, ["fp1"])


def test_a_lost_claim_leaves_the_outcome_alone(store: HotStore) -> None:
    store.claim(["fp2"], "leader", ttl_ms=5000)
    store.record_batch(BatchRecord(failures={"fp2": encode_failure(EmbeddingFailed("x"))}))
    claimed = store.claim(["fp2"], "waiter", ttl_ms=5000)
    assert (claimed.won, claimed.lost) == ([], ["fp2"])
    assert "fp2" in read_outcomes(store, ["fp2"])[1]


def test_failures_read_back_as_the_error_they_were(store: HotStore) -> None:
    publish_failures(store, {"a": PoisonText("died", "a"), "b": UpstreamError("upstream down")},
                     ttl_s=300, counts={"dead_lettered": 1})
    _, failures, _ = read_outcomes(store, ["a", "b"])
    assert isinstance(failures["a"], PoisonText) and failures["a"].fingerprint == "a"
    assert isinstance(failures["b"], UpstreamError) and str(failures["b"]) == "upstream down"
    assert store.counters()["dead_lettered"] == 1


def test_published_vectors_free_their_claims(store: HotStore) -> None:
    store.claim(["pv"], "leader", ttl_ms=60_000)
    publish_vectors(store, {"pv": ONE}, ttl_s=60)
    assert store.holders(Hold.CLAIM, ["pv"]) == [None]
    assert store.vectors(["pv"]) == [ONE]


def test_a_wait_hands_back_orphans_at_once_and_the_rest_as_pending(store: HotStore) -> None:
    store.claim(["held", "orphan"], "someone", ttl_ms=60_000)
    store.release(Hold.CLAIM, ["orphan"])  # its leader vanished without an outcome
    started = time.monotonic()
    got = Waiting(store).wait(["held", "orphan"], FAST, deadline=time.monotonic() + 5)
    assert got.orphans == ["orphan"] and got.pending == ["held"]
    assert time.monotonic() - started < 4  # handed back at once, not at the deadline


def test_an_orphan_the_durable_store_holds_is_an_outcome(store: HotStore) -> None:
    class Durable(VectorStore):
        def get_many(self, fps: list[str]) -> dict[str, bytes]:
            return {fp: ONE for fp in fps if fp == "kept"}

        def put_many(self, rows: list[StoredVector]) -> int:
            return 0

        def count(self) -> int:
            return 1

    got = Waiting(store, Durable()).wait(["kept", "lost"], FAST,
                                         deadline=time.monotonic() + 5)
    assert got.vectors == {"kept": ONE} and got.orphans == ["lost"]
    no_durable = WaitPolicy(Hold.CLAIM, 0.01, 0.0, durable=False, ride_out_outages=False)
    got = Waiting(store, Durable()).wait(["kept"], no_durable, deadline=time.monotonic() + 5)
    assert got.orphans == ["kept"]


def test_a_wait_ends_with_the_outcome_published_meanwhile(store: HotStore) -> None:
    store.claim(["soon"], "leader", ttl_ms=60_000)
    waiting = Waiting(store)
    publisher = threading.Timer(0.1, publish_vectors, args=(store, {"soon": ONE}, 60))
    publisher.start()
    got = waiting.wait(["soon"], REQUEST, deadline=time.monotonic() + 10)
    publisher.join()  # before the store closes: the wake can come before its replies
    assert got.vectors == {"soon": ONE} and not got.pending and not got.orphans


def test_a_wait_stops_at_the_deadline(store: HotStore) -> None:
    store.claim(["slow"], "someone", ttl_ms=60_000)
    got = Waiting(store).wait(["slow"], FAST, deadline=time.monotonic() + 0.2)
    assert got.pending == ["slow"] and not got.vectors and not got.failures


def test_the_redelivery_policy_waits_on_run_leases(store: HotStore) -> None:
    store.lease(["running"], "runner", ttl_ms=60_000)
    store.claim(["running"], "someone", ttl_ms=60_000)
    got = Waiting(store).wait(["running"], REDELIVERY, deadline=time.monotonic() + 0.2)
    assert got.pending == ["running"]
    store.release(Hold.LEASE, ["running"])  # the runner died: the claim does not matter
    got = Waiting(store).wait(["running"], REDELIVERY, deadline=time.monotonic() + 5)
    assert got.orphans == ["running"]


class Unreachable(MemoryHotStore):
    """A store whose every outcome read fails, as Redis does while it restarts."""

    def settled(self, fps: list[str]) -> Settled:
        raise BrokerUnavailable("Redis is unreachable (for the test)")


def test_an_outage_is_ridden_out_by_requests_and_raised_by_the_others() -> None:
    got = Waiting(Unreachable()).wait(["x"], REQUEST, deadline=time.monotonic() + 0.3)
    assert got.pending == ["x"] and isinstance(got.outage, BrokerUnavailable)
    for policy in (REDELIVERY, CHUNK):
        with pytest.raises(BrokerUnavailable):
            Waiting(Unreachable()).wait(["x"], policy, deadline=time.monotonic() + 0.3)
