"""The batcher: full batches, online first, duplicates once, budgets honoured."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from embedq.encoders.hashing import HashingEncoder
from embedq.fingerprint import EncodeSpec
from embedq.workers.batcher import ONLINE_WRITE_BATCHES, Batcher
from embedq.workers.items import BULK, ONLINE, Batch, Item
from embedq.workers.outcome import wait_all
from tests import support

SPEC = EncodeSpec("hashing", "hashing-v2")


class RecordingEncoder(HashingEncoder):
    """The hashing encoder, remembering each batch; can hold the first batch."""

    def __init__(self, hold_first: bool = False) -> None:
        super().__init__()
        self.batches: list[list[str]] = []
        self.release = threading.Event()
        self.started = threading.Event()
        if not hold_first:
            self.release.set()

    def encode(self, texts: list[str]):  # type: ignore[no-untyped-def]
        self.batches.append(list(texts))
        self.started.set()
        self.release.wait(10)
        return super().encode(texts)


def held(lane: int = ONLINE, **limits: int) -> tuple[RecordingEncoder, Batcher]:
    """A batcher whose model is busy with a first one-text batch of `lane` until
    `enc.release` is set, so what is submitted next queues up."""
    enc = RecordingEncoder(hold_first=True)
    batcher = Batcher(enc, one_by_one(finish), wait_ms=1, **limits)
    batcher.submit(items(["hold"], lane=lane))
    assert enc.started.wait(5)
    return enc, batcher


def one_by_one(write: Callable[[Batch], None]) -> Callable[[list[Batch]], None]:
    """A sink from a function of one batch (the batcher hands over one or more)."""
    def sink(batches: list[Batch]) -> None:
        for batch in batches:
            write(batch)

    return sink


def finish(batch: Batch) -> None:
    assert batch.raw is not None
    for row, items in zip(batch.raw, batch.waiters, strict=True):
        for item in items:
            item.future.set_result(row.tobytes())


def items(texts: list[str], lane: int = ONLINE, alone: bool = False) -> list[Item]:
    return [Item(fp=f"fp-{t}", text=t, spec=SPEC, lane=lane, alone=alone) for t in texts]


def test_duplicate_texts_are_encoded_once() -> None:
    enc = RecordingEncoder()
    batcher = Batcher(enc, one_by_one(finish), wait_ms=20)
    work = items(["same text", "same text", "other"])
    batcher.submit(work)
    wait_all([i.future for i in work], timeout=5)
    assert all(i.future.result() for i in work)
    assert sorted(t for b in enc.batches for t in b) == ["other", "same text"]
    batcher.stop()


def test_online_items_jump_ahead_of_queued_bulk_items() -> None:
    enc = RecordingEncoder(hold_first=True)
    batcher = Batcher(enc, one_by_one(finish), wait_ms=1, max_texts=4)
    first = items([f"bulk first {i}" for i in range(4)], lane=BULK)
    batcher.submit(first)
    assert enc.started.wait(5)
    later_bulk = items([f"bulk later {i}" for i in range(4)], lane=BULK)
    online = items([f"online {i}" for i in range(2)], lane=ONLINE)
    batcher.submit(later_bulk)
    batcher.submit(online)
    enc.release.set()
    wait_all([i.future for i in first + later_bulk + online], timeout=5)
    assert sorted(enc.batches[1]) == ["online 0", "online 1"]
    batcher.stop()


def test_batches_respect_the_token_budget_longest_first_within_a_batch() -> None:
    enc, batcher = held(ONLINE, max_tokens=40, max_texts=100)
    texts = [" ".join(["w"] * n) for n in (1, 8, 3, 7, 2, 5)]  # tokens = words + 2
    work = items(texts)
    batcher.submit(work)
    enc.release.set()
    wait_all([i.future for i in work], timeout=5)
    for batch in enc.batches[1:]:
        tokens = [2 + len(t.split()) for t in batch]
        assert max(tokens) * len(batch) <= 40
        assert tokens == sorted(tokens, reverse=True)
    assert sorted(t for b in enc.batches[1:] for t in b) == sorted(texts)
    batcher.stop()


def test_the_oldest_text_is_in_the_next_batch_with_its_length_neighbours() -> None:
    enc, batcher = held(BULK, max_tokens=10_000, max_texts=3)
    short = items(["short one"], lane=BULK)  # 4 tokens, queued first
    longer = items([" ".join(["w"] * n) for n in (20, 21, 22, 3, 2, 23)], lane=BULK)
    batcher.submit(short)
    batcher.submit(longer)
    enc.release.set()
    wait_all([i.future for i in short + longer], timeout=5)
    # Longest-first would serve "short one" last; it goes first, with the two texts
    # nearest its length (5 and 4 tokens).
    assert sorted(enc.batches[1]) == sorted(["short one", "w w w", "w w"])
    batcher.stop()


def test_suspects_are_encoded_alone() -> None:
    enc, batcher = held(ONLINE)
    work = items(["a", "b"]) + items(["suspect"], alone=True) + items(["c"])
    batcher.submit(work)
    enc.release.set()
    wait_all([i.future for i in work], timeout=5)
    assert ["suspect"] in enc.batches
    assert all(len(b) == 1 for b in enc.batches if "suspect" in b)
    batcher.stop()


def test_encoder_errors_reach_the_sink() -> None:
    class Broken(HashingEncoder):
        def encode(self, texts: list[str]):  # type: ignore[no-untyped-def]
            raise RuntimeError("device lost")

    seen: list[BaseException | None] = []

    def sink(batch: Batch) -> None:
        seen.append(batch.error)
        for waiters in batch.waiters:
            for item in waiters:
                item.future.set_exception(batch.error or RuntimeError())

    batcher = Batcher(Broken(), one_by_one(sink), wait_ms=1)
    work = items(["x"])
    batcher.submit(work)
    wait_all([work[0].future], timeout=5)
    assert isinstance(seen[0], RuntimeError) and "device lost" in str(seen[0])
    batcher.stop()


def test_bulk_batches_shrink_to_a_quarter_before_any_cost_is_measured() -> None:
    enc, batcher = held(ONLINE, max_tokens=10_000, max_texts=64)
    bulk = items([f"bulk {i}" for i in range(64)], lane=BULK)
    batcher.submit(bulk)
    enc.release.set()
    wait_all([i.future for i in bulk], timeout=5)
    assert len(enc.batches[1]) == 64 // 4  # online was recent, nothing measured yet
    batcher.stop()


class CostlyEncoder(RecordingEncoder):
    """Sleeps one millisecond per padded token: a known cost to learn."""

    def encode(self, texts: list[str]):  # type: ignore[no-untyped-def]
        tokens = max(self.count_tokens(texts)) * len(texts)
        time.sleep(tokens / 1000)
        return super().encode(texts)


class RemoteEncoder(CostlyEncoder):
    """A call costs the same whatever its size, as a remote API's round trip does."""

    flat_cost = True

    def encode(self, texts: list[str]):  # type: ignore[no-untyped-def]
        time.sleep(0.02)
        return RecordingEncoder.encode(self, texts)


def test_a_flat_cost_encoder_keeps_whole_bulk_batches_while_online_is_recent() -> None:
    enc = RemoteEncoder()
    batcher = Batcher(enc, one_by_one(finish), wait_ms=1, max_tokens=10_000, max_texts=16,
                      bulk_step_ms=1)
    batcher.submit(items(["recent online text"], lane=ONLINE))
    bulk = items([f"bulk {i}" for i in range(64)], lane=BULK)
    batcher.submit(bulk)
    wait_all([i.future for i in bulk], timeout=10)
    assert batcher.bulk_budget() == (10_000, 16)
    sizes = [len(b) for b in enc.batches if b[0].startswith("bulk")]
    assert sum(sizes) == 64 and len(sizes) <= 5  # 16 a call, not one text a call
    batcher.stop()


def test_bulk_batches_follow_the_measured_cost_while_online_traffic_is_recent() -> None:
    enc = CostlyEncoder()
    batcher = Batcher(enc, one_by_one(finish), wait_ms=1, max_tokens=10_000, max_texts=64,
                      bulk_step_ms=20)
    batcher.submit(items(["recent online text"], lane=ONLINE))
    bulk = items([f"bulk {i}" for i in range(64)], lane=BULK)  # 4 tokens each
    batcher.submit(bulk)
    wait_all([i.future for i in bulk], timeout=10)
    tokens, texts = batcher.bulk_budget()
    # No layers: one step is the whole batch, 20 ms at ~1 ms a padded token.
    assert 10 <= tokens <= 20 and texts == 64
    later = [b for b in enc.batches if b[0].startswith("bulk")][1:]
    assert later and all(len(b) * 4 <= 20 for b in later)
    batcher.stop()


class LayeredEncoder(HashingEncoder):
    """Encodes in `steps` steps and calls the batcher's checkpoint before each, like the
    layer hooks of a real model; the first bulk batch holds at its first step."""

    steps = 4

    def __init__(self) -> None:
        super().__init__()
        self.hooks: list[Callable[[], None]] = []
        self.batches: list[list[str]] = []
        self.holding = threading.Event()
        self.release = threading.Event()

    def add_checkpoint(self, hook: Callable[[], None]) -> int:
        self.hooks.append(hook)
        return self.steps

    def remove_checkpoint(self, hook: Callable[[], None]) -> None:
        self.hooks.remove(hook)

    def encode(self, texts: list[str]):  # type: ignore[no-untyped-def]
        self.batches.append(list(texts))
        for step in range(self.steps):
            if step == 1 and texts[0].startswith("bulk") and not self.holding.is_set():
                self.holding.set()
                self.release.wait(10)
            for hook in self.hooks:
                hook()
        return super().encode(texts)


def test_online_texts_run_inside_a_bulk_batch_at_the_next_layer() -> None:
    enc = LayeredEncoder()
    finished: list[str] = []

    def record(batch: Batch) -> None:
        finished.extend(batch.texts)
        finish(batch)

    batcher = Batcher(enc, one_by_one(record), wait_ms=1)
    bulk = items([f"bulk {i}" for i in range(8)], lane=BULK)
    batcher.submit(bulk)
    assert enc.holding.wait(5)
    online = items(["online a", "online b"], lane=ONLINE)
    batcher.submit(online)
    enc.release.set()
    wait_all([i.future for i in bulk + online], timeout=5)
    # The online batch ran between the bulk batch's steps, and was written first.
    assert enc.batches == [[f"bulk {i}" for i in range(8)], ["online a", "online b"]]
    assert finished[:2] == ["online a", "online b"]
    assert batcher.preemptions == 1
    reference = HashingEncoder()
    for item in bulk + online:
        assert item.future.result() == reference.encode([item.text])[0].tobytes()
    batcher.stop()
    assert enc.hooks == []


def test_reserved_room_admits_one_bulk_slice_at_a_time_until_the_lane_drains() -> None:
    enc, batcher = held(BULK, max_texts=2)  # low water: 4 x 2 = 8 texts
    first = batcher.reserve(BULK, 8)  # the lane is empty: admitted at once
    admitted = threading.Event()
    second_room: list[object] = []

    def second() -> None:
        second_room.append(batcher.reserve(BULK, 8))
        admitted.set()

    threading.Thread(target=second, daemon=True).start()
    assert not admitted.wait(0.2)  # 8 reserved: the next slice waits
    work = items([f"slice one {i}" for i in range(8)], lane=BULK)
    batcher.submit(work, first)
    assert first.size == 0  # the submit filled the reservation
    assert not admitted.wait(0.2)  # 8 queued behind the held batch: still full
    enc.release.set()  # the model drains the lane
    assert admitted.wait(5)
    wait_all([i.future for i in work], timeout=5)
    batcher.release(second_room[0])  # type: ignore[arg-type]
    batcher.stop()


def test_a_room_released_unused_lets_the_next_slice_in() -> None:
    batcher = Batcher(RecordingEncoder(), one_by_one(finish), wait_ms=1, max_texts=2)
    room = batcher.reserve(BULK, 8)
    admitted = threading.Event()
    threading.Thread(target=lambda: (batcher.reserve(BULK, 8), admitted.set()),
                     daemon=True).start()
    assert not admitted.wait(0.2)
    batcher.release(room)  # e.g. every text of the slice was already stored
    assert admitted.wait(5)
    batcher.stop()


def test_a_suspect_is_encoded_only_after_every_earlier_batch_is_written() -> None:
    # If the suspect kills the process, a batch still waiting for the writer would be
    # charged an attempt too; a healthy text charged in every life gets dead-lettered.
    events: list[str] = []
    suspect_started = threading.Event()

    class Recording(HashingEncoder):
        def encode(self, texts: list[str]):  # type: ignore[no-untyped-def]
            events.append("encode " + ",".join(texts))
            if "suspect" in texts:
                suspect_started.set()
            return super().encode(texts)

    def slow_sink(batch: Batch) -> None:
        if batch.texts == ["healthy"]:
            # A writer slower than the next encode: gives the suspect every chance to
            # overtake it (it must not), bounded so the test ends either way.
            suspect_started.wait(1.0)
        events.append("written " + ",".join(batch.texts))
        finish(batch)

    batcher = Batcher(Recording(), one_by_one(slow_sink), wait_ms=1)
    first = items(["healthy"])
    batcher.submit(first)
    deadline = time.monotonic() + 5
    while "encode healthy" not in events and time.monotonic() < deadline:
        time.sleep(0.001)
    suspect = items(["suspect"], alone=True)
    batcher.submit(suspect)
    wait_all([i.future for i in first + suspect], timeout=5)
    assert events.index("written healthy") < events.index("encode suspect"), events
    batcher.stop()


def _writes_behind_a_slow_first_write(first_lane: int) -> tuple[list[int], list[Item]]:
    """Batch counts of each write when the first write is slow and 40 bulk texts (batches of
    at most 4) are encoded meanwhile."""
    enc = RecordingEncoder()
    groups: list[int] = []
    writing, gate = threading.Event(), threading.Event()

    def sink(batches: list[Batch]) -> None:
        if not groups:
            writing.set()
            gate.wait(10)
        groups.append(len(batches))
        for batch in batches:
            finish(batch)

    batcher = Batcher(enc, sink, wait_ms=0, max_texts=4)
    first = items(["first"], lane=first_lane)
    batcher.submit(first)
    assert writing.wait(5)
    rest = items([f"bulk {i}" for i in range(40)], lane=BULK)
    batcher.submit(rest)
    # The model encodes one batch at a time and queues each before it starts the next:
    # once the last has started, at most that one can still miss the next write.
    support.wait_until(lambda: sum(map(len, enc.batches)) == 41, 10,
                       "the 41 texts at the model", interval_s=0.005)
    gate.set()
    wait_all([i.future for i in first + rest], timeout=10)
    batcher.stop()
    return groups, rest


def test_a_writer_behind_a_fast_model_takes_every_batch_encoded_meanwhile() -> None:
    # A free model outruns its writes: the writer's queue holds a whole write group, so
    # the ten bulk batches encoded during the slow first write go in one or two writes
    # (a queue of two batches made four writes of three at most).
    groups, rest = _writes_behind_a_slow_first_write(BULK)
    assert all(i.future.result() for i in rest)
    assert groups[0] == 1 and sum(groups[1:]) == 10
    assert len(groups[1:]) <= 2, groups


def test_while_online_texts_arrive_a_bulk_write_stays_short() -> None:
    # An online batch must not wait behind one long write of bulk rows.
    groups, rest = _writes_behind_a_slow_first_write(ONLINE)
    assert all(i.future.result() for i in rest)
    assert groups[0] == 1 and sum(groups[1:]) >= 10
    assert max(groups[1:]) <= ONLINE_WRITE_BATCHES, groups
