"""Interest: who still waits for a fingerprint (the hot stores, a call's RequestGroup, the
worker's last check before encoding), on the in-process and the Redis store."""

from __future__ import annotations

import threading
import time

import pytest

from embedq.coordination.executor import Ticket
from embedq.coordination.interest import RequestGroup
from embedq.coordination.memory import MemoryHotStore
from embedq.coordination.store import Claimed, Hold, HotStore, Interest
from embedq.coordination.waiting import REQUEST, Waiting
from embedq.encoders.hashing import HashingEncoder
from embedq.errors import Abandoned
from embedq.fingerprint import EncodeSpec
from embedq.workers.batcher import Batcher
from embedq.workers.interest import DropUnwanted
from embedq.workers.items import Batch, Item
from tests import support

SPEC = EncodeSpec("hashing", "hashing-v2")


def claimed(store: HotStore, fps: list[str], group: RequestGroup,
            timeout_s: float = 30) -> Claimed:
    group.bind(fps, time.monotonic() + timeout_s)
    return store.claim(fps, group.owner, 60_000, group.interest(fps))


def want(store: HotStore, callers: dict[str, list[str]], ttl_ms: int) -> None:
    """Register interest alone (a claim of nothing)."""
    store.claim([], "nobody", 60_000, Interest(callers, ttl_ms))


# --- the store
def test_a_fingerprint_is_wanted_until_its_last_caller_withdraws(store: HotStore) -> None:
    want(store, {"fp": ["a", "b"]}, ttl_ms=30_000)
    store.unwant({"fp": ["a"]})
    assert store.drop_unwanted([("fp", "owner")]) == []
    store.unwant({"fp": ["b"]})
    assert store.drop_unwanted([("fp", "owner")]) == ["fp"]


def test_interest_ends_at_the_callers_deadline(store: HotStore) -> None:
    want(store, {"fp": ["a"]}, ttl_ms=150)
    assert store.drop_unwanted([("fp", "owner")]) == []
    support.wait_until(lambda: store.drop_unwanted([("fp", "owner")]) == ["fp"], 5,
                       "the interest ending at its deadline")


def test_a_caller_registered_again_keeps_the_later_end(store: HotStore) -> None:
    want(store, {"fp": ["a"]}, ttl_ms=30_000)
    want(store, {"fp": ["a"]}, ttl_ms=50)  # a re-queue near the end must not shorten it
    time.sleep(0.2)
    assert store.drop_unwanted([("fp", "owner")]) == []


def test_a_fingerprint_nobody_registered_for_is_unwanted(store: HotStore) -> None:
    assert store.drop_unwanted([("never", "owner")]) == ["never"]


def test_dropping_releases_only_the_claim_its_owner_still_holds(store: HotStore) -> None:
    store.claim(["mine", "theirs"], "owner", 60_000)
    store.release(Hold.CLAIM, ["theirs"])
    store.claim(["theirs"], "a-job-chunk", 60_000)
    before = store.counters()["abandoned"]
    dropped = store.drop_unwanted([("mine", "owner"), ("theirs", "owner"),
                                   ("mine", "another-owner")])
    assert dropped == ["mine", "theirs"]
    assert store.holders(Hold.CLAIM, ["mine", "theirs"]) == [None, "a-job-chunk"]
    assert store.counters()["abandoned"] == before + 2  # per fingerprint, not per pair


def test_claiming_registers_interest_for_won_and_lost_claims_alike(store: HotStore) -> None:
    store.claim(["held"], "someone-else", 60_000)
    group = RequestGroup([2])
    got = claimed(store, ["new", "held"], group)
    assert (got.won, got.lost) == (["new"], ["held"])
    assert store.holders(Hold.CLAIM, ["new"]) == [group.owner]
    assert store.drop_unwanted([("new", group.owner), ("held", "someone-else")]) == []


# --- the requests of one call
def test_a_request_leaving_withdraws_only_what_no_other_request_wants(store: HotStore
                                                                      ) -> None:
    group = RequestGroup([2, 1])  # request 0: shared, mine; request 1: shared
    claimed(store, ["shared", "mine", "shared"], group)
    assert group.unwant_departed(store, ["shared", "mine"]) == ["shared", "mine"]
    group.leave(0)
    assert group.wake.is_set()
    assert group.unwant_departed(store, ["shared", "mine"]) == ["shared"]
    assert store.drop_unwanted([("shared", group.owner), ("mine", group.owner)]) == ["mine"]
    group.leave(1)
    assert group.unwant_departed(store, ["shared"]) == []
    assert store.drop_unwanted([("shared", group.owner)]) == ["shared"]


def test_a_request_gone_before_the_claim_registers_no_interest(store: HotStore) -> None:
    group = RequestGroup([1, 1])
    group.leave(0)
    claimed(store, ["left", "stays"], group)
    assert store.drop_unwanted([("left", group.owner), ("stays", group.owner)]) == ["left"]


def test_a_departure_wakes_the_wait_and_ends_it_for_what_nobody_wants(store: HotStore
                                                                      ) -> None:
    group = RequestGroup([1])
    claimed(store, ["slow"], group, timeout_s=30)
    threading.Timer(0.2, group.leave, args=(0,)).start()
    started = time.monotonic()
    got = Waiting(store).wait(["slow"], REQUEST, deadline=time.monotonic() + 30, group=group)
    assert got.pending == ["slow"] and not got.vectors
    assert time.monotonic() - started < 5  # woken by the departure, not a poll
    assert store.drop_unwanted([("slow", group.owner)]) == ["slow"]


def test_a_group_binds_one_fingerprint_per_input() -> None:
    with pytest.raises(ValueError, match="2 fingerprints for 3 inputs"):
        RequestGroup([2, 1]).bind(["a", "b"], time.monotonic() + 1)


# --- the worker's last check
def items(fps: list[str], owner: str | None) -> list[Item]:
    ticket = Ticket(owner) if owner is not None else None
    return [Item(fp=fp, text=f"text {fp}", spec=SPEC, ticket=ticket) for fp in fps]


def test_keep_wanted_leaves_out_unwanted_online_items_and_fails_their_futures(
        store: HotStore) -> None:
    want(store, {"wanted": ["a"]}, ttl_ms=30_000)
    batch = items(["wanted", "gone"], "owner")
    kept = DropUnwanted(store)(batch)
    assert [i.fp for i in kept] == ["wanted"]
    assert isinstance(batch[1].future.exception(timeout=0), Abandoned)
    assert not batch[0].future.done()


def test_keep_wanted_encodes_whatever_an_item_without_a_ticket_wants(store: HotStore
                                                                    ) -> None:
    """A job's chunk (no ticket) wants its text, whatever the online callers did."""
    batch = items(["shared"], "owner") + items(["shared"], None) + items(["bulk"], None)
    before = store.counters()["abandoned"]
    assert DropUnwanted(store)(batch) == batch
    assert store.counters()["abandoned"] == before


def test_a_request_waiting_in_this_process_keeps_its_item_without_the_store(
        store: HotStore) -> None:
    """Local encoding: the call's own group answers while all its requests are here
    (nothing is registered in the store here, which alone would drop both items); once
    one has left, or the deadline passed, the store decides."""
    here = RequestGroup([1])
    here.bind(["here"], time.monotonic() + 30)
    left = RequestGroup([1])
    left.bind(["left"], time.monotonic() + 30)
    left.leave(0)
    late = RequestGroup([1])
    late.bind(["late"], time.monotonic() - 1)
    batch = [Item(fp=fp, text="t", spec=SPEC, ticket=Ticket(g.owner, g))
             for fp, g in (("here", here), ("left", left), ("late", late))]
    assert (here.present(), left.present(), late.present()) == (True, False, False)
    kept = DropUnwanted(store)(batch)
    assert [i.fp for i in kept] == ["here"]
    assert isinstance(batch[1].future.exception(timeout=0), Abandoned)
    assert isinstance(batch[2].future.exception(timeout=0), Abandoned)


def test_items_left_out_are_never_encoded() -> None:
    store = MemoryHotStore()
    want(store, {"fp-wanted": ["a"]}, ttl_ms=30_000)
    encoded: list[list[str]] = []

    class Recording(HashingEncoder):
        def encode(self, texts: list[str]):  # type: ignore[no-untyped-def]
            encoded.append(list(texts))
            return super().encode(texts)

    def finish(batches: list[Batch]) -> None:
        for batch in batches:
            assert batch.raw is not None
            for row, waiters in zip(batch.raw, batch.waiters, strict=True):
                for item in waiters:
                    item.future.set_result(row.tobytes())

    batcher = Batcher(Recording(), finish, wait_ms=20, keep=DropUnwanted(store))
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
