"""Claims and outcomes (embedq.coordination), on the in-process and the Redis store."""

from __future__ import annotations

import time

from embedq import coordination
from embedq.cache import keys
from embedq.cache.hot import HotStore
from embedq.errors import EmbeddingFailed, PoisonText, UpstreamError


def test_a_new_claim_clears_the_failure_an_earlier_computation_left(store: HotStore) -> None:
    coordination.publish_failures(store, {"fp1": EmbeddingFailed("transient")}, ttl_s=300)
    assert "fp1" in coordination.read_outcomes(store, ["fp1"])[1]
    won, lost = coordination.claim(store, ["fp1"], "req-2", ttl_ms=5000)
    assert (won, lost) == (["fp1"], [])
    assert coordination.read_outcomes(store, ["fp1"]) == ({}, {}, ["fp1"])


def test_a_lost_claim_leaves_the_outcome_alone(store: HotStore) -> None:
    coordination.claim(store, ["fp2"], "leader", ttl_ms=5000)
    store.put_failures({"fp2": coordination.encode_failure(EmbeddingFailed("x"))}, 300)
    won, lost = coordination.claim(store, ["fp2"], "waiter", ttl_ms=5000)
    assert (won, lost) == ([], ["fp2"])
    assert "fp2" in coordination.read_outcomes(store, ["fp2"])[1]


def test_failures_read_back_as_the_error_they_were(store: HotStore) -> None:
    coordination.publish_failures(store, {"a": PoisonText("died", "a"),
                                          "b": UpstreamError("upstream down")}, ttl_s=300)
    _, failures, _ = coordination.read_outcomes(store, ["a", "b"])
    assert isinstance(failures["a"], PoisonText) and failures["a"].fingerprint == "a"
    assert isinstance(failures["b"], UpstreamError) and str(failures["b"]) == "upstream down"


def test_await_outcomes_hands_back_orphans_and_keeps_waiting_on_the_rest(
        store: HotStore) -> None:
    coordination.claim(store, ["held", "orphan"], "someone", ttl_ms=60_000)
    store.release([keys.claim("orphan")])  # its leader vanished without an outcome
    started = time.monotonic()
    got = coordination.await_outcomes(store, ["held", "orphan"],
                                      deadline=time.monotonic() + 5, poll_s=0.01)
    assert got.orphans == ["orphan"] and got.pending == ["held"]
    assert time.monotonic() - started < 4  # handed back at once, not at the deadline


def test_await_outcomes_requeued_orphans_are_awaited_again(store: HotStore) -> None:
    def requeue(orphans: list[str]) -> list[str]:
        coordination.claim(store, orphans, "me", ttl_ms=60_000)
        store.put_vectors({fp: b"\x00\x00\x80\x3f" for fp in orphans}, 60)  # "computed"
        return []

    got = coordination.await_outcomes(store, ["lost"], deadline=time.monotonic() + 5,
                                      adopt=requeue, poll_s=0.01)
    assert got.vectors == {"lost": b"\x00\x00\x80\x3f"} and got.orphans == []


def test_await_outcomes_stops_at_the_deadline(store: HotStore) -> None:
    coordination.claim(store, ["slow"], "someone", ttl_ms=60_000)
    got = coordination.await_outcomes(store, ["slow"], deadline=time.monotonic() + 0.2,
                                      poll_s=0.01)
    assert got.pending == ["slow"] and not got.vectors and not got.failures
