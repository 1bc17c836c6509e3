"""Interest: who still waits for a fingerprint (embedq.coordination, the hot stores, the
worker's last check before encoding), on the in-process and the Redis store."""

from __future__ import annotations

import threading
import time

import pytest

from embedq import coordination
from embedq.cache import keys
from embedq.cache.hot import HotStore, MemoryHotStore
from embedq.encoders.hashing import HashingEncoder
from embedq.errors import Abandoned
from embedq.fingerprint import EncodeSpec
from embedq.workers.batcher import Batch, Batcher, Item
from embedq.workers.interest import KeepWanted
from tests import support

SPEC = EncodeSpec("hashing", "hashing-v1")


def claimed(store: HotStore, fps: list[str], callers: coordination.Callers,
            timeout_s: float = 30) -> tuple[list[str], list[str]]:
    callers.bind(fps, time.monotonic() + timeout_s)
    return coordination.claim_wanted(store, fps, callers, ttl_ms=60_000)


# --- the store
def test_a_fingerprint_is_wanted_until_its_last_caller_withdraws(store: HotStore) -> None:
    store.want({"fp": ["a", "b"]}, ttl_ms=30_000)
    store.unwant({"fp": ["a"]})
    assert store.drop_unwanted([("fp", "owner")]) == []
    store.unwant({"fp": ["b"]})
    assert store.drop_unwanted([("fp", "owner")]) == ["fp"]


def test_interest_ends_at_the_callers_deadline(store: HotStore) -> None:
    store.want({"fp": ["a"]}, ttl_ms=150)
    assert store.drop_unwanted([("fp", "owner")]) == []
    support.wait_until(lambda: store.drop_unwanted([("fp", "owner")]) == ["fp"], 5,
                       "the interest ending at its deadline")


def test_a_caller_registered_again_keeps_the_later_end(store: HotStore) -> None:
    store.want({"fp": ["a"]}, ttl_ms=30_000)
    store.want({"fp": ["a"]}, ttl_ms=50)  # a re-queue near the end must not shorten it
    time.sleep(0.2)
    assert store.drop_unwanted([("fp", "owner")]) == []


def test_a_fingerprint_nobody_registered_for_is_unwanted(store: HotStore) -> None:
    assert store.drop_unwanted([("never", "owner")]) == ["never"]


def test_dropping_releases_only_the_claim_its_owner_still_holds(store: HotStore) -> None:
    store.acquire([keys.claim("mine"), keys.claim("theirs")], "owner", 60_000)
    store.release([keys.claim("theirs")])
    store.acquire([keys.claim("theirs")], "a-job-chunk", 60_000)
    before = store.counters()["abandoned"]
    dropped = store.drop_unwanted([("mine", "owner"), ("theirs", "owner"),
                                   ("mine", "another-owner")])
    assert dropped == ["mine", "theirs"]
    assert store.holders([keys.claim("mine"), keys.claim("theirs")]) == [None, "a-job-chunk"]
    assert store.counters()["abandoned"] == before + 2  # per fingerprint, not per pair


def test_claiming_registers_interest_for_won_and_lost_claims_alike(store: HotStore) -> None:
    store.acquire([keys.claim("held")], "someone-else", 60_000)
    callers = coordination.Callers([2])
    won, lost = claimed(store, ["new", "held"], callers)
    assert (won, lost) == (["new"], ["held"])
    assert store.holders([keys.claim("new")]) == [callers.owner]
    assert store.drop_unwanted([("new", callers.owner), ("held", "someone-else")]) == []


# --- the callers of one call
def test_a_request_leaving_withdraws_only_what_no_other_request_wants(store: HotStore
                                                                      ) -> None:
    callers = coordination.Callers([2, 1])  # request 0: shared, mine; request 1: shared
    claimed(store, ["shared", "mine", "shared"], callers)
    assert coordination.still_wanted(store, callers, ["shared", "mine"]) == ["shared", "mine"]
    callers.leave(0)
    assert callers.wake.is_set()
    assert coordination.still_wanted(store, callers, ["shared", "mine"]) == ["shared"]
    assert store.drop_unwanted([("shared", callers.owner), ("mine", callers.owner)]) == ["mine"]
    callers.leave(1)
    assert coordination.still_wanted(store, callers, ["shared"]) == []
    assert store.drop_unwanted([("shared", callers.owner)]) == ["shared"]


def test_a_request_gone_before_the_claim_registers_no_interest(store: HotStore) -> None:
    callers = coordination.Callers([1, 1])
    callers.leave(0)
    claimed(store, ["left", "stays"], callers)
    assert store.drop_unwanted([("left", callers.owner), ("stays", callers.owner)]) == ["left"]


def test_a_departure_wakes_the_wait_and_ends_it_for_what_nobody_wants(store: HotStore
                                                                      ) -> None:
    callers = coordination.Callers([1])
    claimed(store, ["slow"], callers, timeout_s=30)
    threading.Timer(0.2, callers.leave, args=(0,)).start()
    started = time.monotonic()
    got = coordination.await_outcomes(
        store, ["slow"], deadline=time.monotonic() + 30, poll_s=10, event=callers.wake,
        keep=lambda pending: coordination.still_wanted(store, callers, pending))
    assert got.pending == ["slow"] and not got.vectors
    assert time.monotonic() - started < 5  # woken by the departure, not the 10 s poll
    assert store.drop_unwanted([("slow", callers.owner)]) == ["slow"]


# --- the worker's last check
def items(fps: list[str], owner: str | None) -> list[Item]:
    return [Item(fp=fp, text=f"text {fp}", spec=SPEC, owner=owner) for fp in fps]


def test_keep_wanted_leaves_out_unwanted_online_items_and_fails_their_futures(
        store: HotStore) -> None:
    store.want({"wanted": ["a"]}, ttl_ms=30_000)
    batch = items(["wanted", "gone"], "owner")
    kept = KeepWanted(store)(batch)
    assert [i.fp for i in kept] == ["wanted"]
    assert isinstance(batch[1].future.exception(timeout=0), Abandoned)
    assert not batch[0].future.done()


def test_keep_wanted_encodes_whatever_an_item_without_an_owner_wants(store: HotStore
                                                                    ) -> None:
    """A job's chunk (no owner) wants its text, whatever the online callers did."""
    batch = items(["shared"], "owner") + items(["shared"], None) + items(["bulk"], None)
    before = store.counters()["abandoned"]
    assert KeepWanted(store)(batch) == batch
    assert store.counters()["abandoned"] == before


def test_a_caller_waiting_in_this_process_keeps_its_item_without_the_store(
        store: HotStore) -> None:
    """Local encoding: the call's own `Callers` answers while all its requests are here
    (nothing is registered in the store here, which alone would drop both items); once
    one has left, or the deadline passed, the store decides."""
    here = coordination.Callers([1])
    here.bind(["here"], time.monotonic() + 30)
    left = coordination.Callers([1])
    left.bind(["left"], time.monotonic() + 30)
    left.leave(0)
    late = coordination.Callers([1])
    late.bind(["late"], time.monotonic() - 1)
    batch = [Item(fp=c._fps[0], text="t", spec=SPEC, owner=c.owner, wanted=c.waiting)
             for c in (here, left, late)]
    assert (here.waiting(), left.waiting(), late.waiting()) == (True, False, False)
    kept = KeepWanted(store)(batch)
    assert [i.fp for i in kept] == ["here"]
    assert isinstance(batch[1].future.exception(timeout=0), Abandoned)
    assert isinstance(batch[2].future.exception(timeout=0), Abandoned)


def test_items_left_out_are_never_encoded() -> None:
    store = MemoryHotStore()
    store.want({"fp-wanted": ["a"]}, ttl_ms=30_000)
    encoded: list[list[str]] = []

    class Recording(HashingEncoder):
        def encode(self, texts: list[str]):  # type: ignore[no-untyped-def]
            encoded.append(list(texts))
            return super().encode(texts)

    def finish(batch: Batch) -> None:
        assert batch.raw is not None
        for row, waiters in zip(batch.raw, batch.waiters, strict=True):
            for item in waiters:
                item.future.set_result(row.tobytes())

    batcher = Batcher(Recording(), finish, wait_ms=20, keep=KeepWanted(store))
    try:
        work = items(["fp-wanted", "fp-gone"], "owner")
        batcher.submit(work)
        assert work[0].future.result(timeout=5)
        with pytest.raises(Abandoned):
            work[1].future.result(timeout=5)
        assert encoded == [["text fp-wanted"]]
        assert store.counters()["abandoned"] == 1
    finally:
        batcher.stop()
