"""The batcher: one thread that owns the model and turns queued texts into full batches.

Task threads (Celery's threads pool) `submit` items and wait on their futures. The batcher
thread, each cycle:
  1. waits for work; once the model is free it takes what is queued at once (a batch
     grows while the model is busy with the one before; lingering for more when the model
     is idle only added latency), or lingers `batch_wait_ms` when that is set;
  2. takes online items before bulk items (online wins); a bulk batch already encoding
     pauses before each model layer while online texts wait, encodes them in full, then
     goes on (`add_checkpoint`), so an online text waits at most one layer of bulk work;
     while online texts keep arriving, bulk batches are cut so one layer takes about
     `bulk_step_ms` (the cost per padded token is measured on earlier bulk batches);
  3. collapses items with the same text (the raw vector does not depend on the spec),
     cuts one batch around the lane's oldest item from the items nearest it in token
     count, within the token budget (padded tokens: longest x count) and
     `batch_max_texts`; suspects (texts whose earlier attempt died
     with its process) are encoded alone, and only once every batch encoded before them
     is written, so a poison text only takes itself down (a healthy text still waiting
     for the writer when the poison killed the process would be charged an attempt in
     every life, and dead-lettered with it);
  4. drops the items nobody waits for any more (`keep`: one round trip, online work only),
     counts an attempt per text, encodes once, and hands the raw rows to the writer.
The writer thread (so the next encode overlaps the I/O) finishes each vector for its spec,
rejects NaN/Inf/wrong widths, persists the batch in one statement, fills the hot store,
announces the fingerprints, and resolves each item's future on its own.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from embedq import stages
from embedq.encoders import Encoder
from embedq.workers.items import (
    BULK,
    ONLINE,
    AttemptHook,
    Batch,
    Item,
    KeepHook,
    Room,
    Sink,
    batch_of,
)

log = logging.getLogger(__name__)

# While online texts arrived this recently, bulk batches are cut to the step budget.
ONLINE_GRACE_S = 2.0
# Before any bulk batch was measured, that budget is 1/BULK_SHRINK of the batch budget.
BULK_SHRINK = 4
COST_EWMA = 0.2  # weight of the newest bulk batch in the cost per padded token
WRITE_GROUP_TEXTS = 4096  # at most this many texts in one write of several batches
ONLINE_WRITE_BATCHES = 3  # a write's batches while online texts arrive (the old queue's)


class Batcher:
    def __init__(
        self,
        encoder: Encoder,
        sink: Sink,
        *,
        wait_ms: float = 0.0,
        max_tokens: int = 16_384,
        max_texts: int = 256,
        on_attempt: AttemptHook | None = None,
        parallel: int = 1,
        bulk_step_ms: float = 10.0,
        keep: KeepHook | None = None,
        warm_up: bool = False,
    ) -> None:
        """`warm_up`: the batcher thread runs the model's first forward pass before any
        batch; `wait_warm` waits for it."""
        self.encoder = encoder
        self.sink = sink
        self.wait_s = wait_ms / 1000
        self.max_tokens = max_tokens
        self.max_texts = max_texts
        self.on_attempt = on_attempt
        self.keep = keep
        self.bulk_step_s = bulk_step_ms / 1000
        self._cost: float | None = None  # seconds per padded token of a bulk batch
        self._heap: list[tuple[int, int, Item]] = []
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # the batcher thread waits for work
        self._room = threading.Condition(lock)  # producers wait for the bulk lane to drain
        self._lane_depth = [0, 0]
        self._reserved = [0, 0]
        # Producers that feed the bulk lane slice by slice keep it about this deep: enough
        # to cut full batches of like lengths, little enough that setting up the next slice
        # happens bit by bit while the model runs, not all at once.
        self.low_water = 4 * max_texts
        self._seq = itertools.count()
        self._unwritten = 0  # batches taken and not yet through the writer
        self._written = threading.Condition(threading.Lock())
        self._stop = False
        self._last_online = float("-inf")
        # Encoded batches wait for the writer online first (an online batch encoded while a
        # bulk batch paused for it is written first), as many as one write takes.
        self._writes: queue.PriorityQueue[tuple[int, int, Batch | None]] = \
            queue.PriorityQueue(maxsize=max(2, parallel, -(-WRITE_GROUP_TEXTS // max_texts)))
        self.preemptions = 0
        self.busy_s = 0.0  # the model's time in forward passes (the model-busy share)
        self._preemptible = False
        self._current: Batch | None = None
        self._encoder_thread = 0
        self._warm_up = warm_up
        self._warmed = threading.Event()
        self._warm_error: BaseException | None = None
        self._start(parallel)

    def _start(self, parallel: int) -> None:
        """The encode slots, the layer checkpoints and the two threads."""
        # A local model runs one batch at a time; a remote one may take `parallel` calls.
        self._slots = threading.Semaphore(parallel)
        self._pool = ThreadPoolExecutor(parallel, "embedq-encode") if parallel > 1 else None
        # Only a model run one batch at a time pauses between layers (not a remote pool).
        self._steps = self.encoder.add_checkpoint(self._checkpoint) if parallel == 1 else 0
        self._layered = self._steps > 0
        self._threads = [
            threading.Thread(target=self._encode_loop, name="embedq-batcher", daemon=True),
            threading.Thread(target=self._write_loop, name="embedq-writer", daemon=True),
        ]
        for t in self._threads:
            t.start()

    # --- producer side (task threads)
    def submit(self, items: list[Item], room: Room | None = None) -> None:
        """Queue items (their futures resolve when written); fills `room` if given."""
        if not items:
            if room is not None:
                self.release(room)
            return
        counts = self.encoder.count_tokens([i.text for i in items])
        if any(i.lane == ONLINE for i in items):
            self._last_online = time.monotonic()
        with self._cond:
            for item, n in zip(items, counts, strict=True):
                item.tokens = n
                item.seq = next(self._seq)
                heapq.heappush(self._heap, (item.lane, item.seq, item))
                self._lane_depth[item.lane] += 1
            self._fill(room)
            self._cond.notify()

    def wait_warm(self) -> None:
        """Block until the batcher thread has run the warm-up pass; raise what it raised.
        The model runs on that thread only, its first pass included: a torch model whose
        first parallel region ran on another thread pays for that thread's idle OpenMP
        team on every later call (on 2 cores a one-text encode took 8.5-9.3 ms against
        6.8-7.3; docs/history.md, "One thread runs the model; counters behind the answer")."""
        self._warmed.wait()
        if self._warm_error is not None:
            raise self._warm_error

    def depth(self) -> int:
        with self._cond:
            return len(self._heap)

    def reserve(self, lane: int, size: int) -> Room:
        """Block until `lane` holds (and others reserved) fewer than `low_water` items, then
        reserve room for `size`: a producer feeding the lane slice by slice sets up one
        slice at a time, just before the batcher needs it. `submit(..., room=)` fills the
        reservation; `release` gives back one that was never filled."""
        with self._room:
            self._room.wait_for(lambda: self._stop or (
                self._lane_depth[lane] + self._reserved[lane] < self.low_water))
            self._reserved[lane] += size
        return Room(lane, size)

    def release(self, room: Room) -> None:
        with self._room:
            self._fill(room)

    def _fill(self, room: Room | None) -> None:
        if room is not None and room.size:
            self._reserved[room.lane] -= room.size
            room.size = 0
            self._room.notify_all()

    def stop(self) -> None:
        if self._layered:
            self.encoder.remove_checkpoint(self._checkpoint)
        with self._cond:
            self._stop = True
            self._cond.notify_all()
            self._room.notify_all()

    # --- the batcher thread
    def _take(self) -> list[Item] | None:
        """Block until work, linger briefly for more, then pop one batch's worth of items."""
        with self._cond:
            while not self._heap and not self._stop:
                self._cond.wait()
            if self._stop:
                return None
            deadline = time.monotonic() + self.wait_s
            while len(self._heap) < self.max_texts and not self._stop:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return self._cut()

    def _cut(self) -> list[Item]:
        """Pop the next batch: the top lane's oldest item, and the queued items of that
        lane closest to it in length, so padding stays low and nothing waits forever (a
        longest-first cut starved short texts, so a chunk's slices all ended together and
        the queue ran dry between them)."""
        lane, _, first = self._heap[0]
        if first.alone:
            heapq.heappop(self._heap)
            self._taken([first])
            return [first]
        anchor = first.tokens
        candidates = [e for e in self._heap if e[0] == lane and not e[2].alone]
        candidates.sort(key=lambda e: (abs(e[2].tokens - anchor), e[1]))
        max_tokens, max_texts = self.max_tokens, self.max_texts
        if lane == BULK and self._online_recent():
            max_tokens, max_texts = self.bulk_budget()
        chosen: list[Item] = []
        texts: set[str] = set()
        longest = 0
        for _, _, item in candidates:
            if item.text in texts:
                chosen.append(item)
                continue
            width = max(longest, item.tokens)
            if chosen and (width * (len(texts) + 1) > max_tokens
                           or len(texts) + 1 > max_texts):
                break
            chosen.append(item)
            texts.add(item.text)
            longest = width
        picked = set(map(id, chosen))
        self._heap = [e for e in self._heap if id(e[2]) not in picked]
        heapq.heapify(self._heap)
        self._taken(chosen)
        chosen.sort(key=lambda i: -i.tokens)
        return chosen

    def _taken(self, items: list[Item]) -> None:
        for item in items:
            self._lane_depth[item.lane] -= 1
        self._room.notify_all()

    def _online_recent(self) -> bool:  # bulk batches and writes stay short meanwhile
        return time.monotonic() - self._last_online < ONLINE_GRACE_S

    def bulk_budget(self) -> tuple[int, int]:
        """Padded tokens and texts of a bulk batch while online texts keep arriving: one
        step (a layer, or the whole batch for an encoder without layers) ~ bulk_step_ms.
        An encoder whose calls cost the same whatever their size keeps the whole budget."""
        if self.encoder.flat_cost:
            return self.max_tokens, self.max_texts
        if self._cost is None:
            return max(1, self.max_tokens // BULK_SHRINK), max(1, self.max_texts // BULK_SHRINK)
        steps = self._steps + 1  # the layers, and the work before and after them
        tokens = int(self.bulk_step_s * steps / self._cost)
        return max(1, min(self.max_tokens, tokens)), self.max_texts

    def _encode_loop(self) -> None:
        self._encoder_thread = threading.get_ident()
        if self._warm_up:
            try:
                self.encoder.warm_up()
            except BaseException as exc:  # handed to wait_warm's caller
                self._warm_error = exc
        self._warmed.set()
        while True:
            self._slots.acquire()
            items = self._take()
            if items is None:
                self._writes.put((BULK + 1, next(self._seq), None))
                return
            items = self._kept(items)
            if not items:
                self._slots.release()
                continue
            if items[0].alone:
                self._await_written()
            batch = self._begin(items)
            if self._pool is not None:
                self._pool.submit(self._encode, batch, items, True)
            else:
                self._encode(batch, items, True)

    def _kept(self, items: list[Item]) -> list[Item]:
        if self.keep is None:
            return items
        try:
            return self.keep(items)
        except Exception:  # the batcher thread must outlive its hook: encode them all
            log.exception("keep hook failed; encoding the whole batch")
            return items

    def _begin(self, items: list[Item]) -> Batch:
        with self._written:
            self._unwritten += 1
        return batch_of(items)

    def _await_written(self) -> None:
        """Block until every batch taken so far went through the writer (before a suspect
        runs: if it kills the process, nothing else is charged an attempt for it)."""
        with self._written:
            self._written.wait_for(lambda: self._unwritten == 0)

    def _encode(self, batch: Batch, items: list[Item], release: bool) -> None:
        # A local model's bulk batch may pause between layers for online texts.
        self._preemptible = self._layered and items[0].lane == BULK
        self._current = batch
        try:
            if self.on_attempt is not None:
                self.on_attempt(sorted({i.fp for i in items}))
            began = time.perf_counter()
            with stages.timed("encode"):
                batch.raw = self.encoder.encode(batch.texts)
            batch.encode_s = time.perf_counter() - began - batch.paused
            self.busy_s += batch.encode_s
            if items[0].lane == BULK and batch.tokens:
                self._learn_cost(batch.encode_s / batch.tokens)
        except Exception as exc:  # the writer decides per item what the failure means
            batch.error = exc
        finally:
            self._preemptible = False
            if release:
                self._slots.release()
        self._writes.put((batch.lane, next(self._seq), batch))

    def _learn_cost(self, per_token: float) -> None:
        old = self._cost
        self._cost = per_token if old is None else old + COST_EWMA * (per_token - old)

    def _checkpoint(self) -> None:
        """Called by the encoder before each layer: online texts waiting behind a bulk
        batch are encoded now, in full, and the bulk batch goes on where it paused."""
        if not self._preemptible or threading.get_ident() != self._encoder_thread:
            return
        bulk = self._current
        with self._cond:
            waiting = bool(self._heap) and self._heap[0][0] == ONLINE
        if not waiting or bulk is None:
            return
        paused = time.perf_counter()
        try:
            while True:
                with self._cond:
                    # A suspect waits for the bulk batch: it runs once all else is written.
                    if (not self._heap or self._heap[0][0] != ONLINE
                            or self._heap[0][2].alone):
                        break
                    items = self._cut()
                items = self._kept(items)
                if not items:
                    continue
                self.preemptions += 1
                self._encode(self._begin(items), items, False)
        finally:
            bulk.paused += time.perf_counter() - paused
            self._current = bulk
            self._preemptible = True

    def _write_loop(self) -> None:
        """Hand the writer every batch encoded since its last write, online first: one
        write a group of at most WRITE_GROUP_TEXTS texts, or ONLINE_WRITE_BATCHES batches
        while online texts arrive (only a first online batch may wait for a long write)."""
        stop = False
        while not stop:
            _, _, first = self._writes.get()
            if first is None:
                return
            group, texts = [first], len(first.texts)
            most = ONLINE_WRITE_BATCHES if self._online_recent() else WRITE_GROUP_TEXTS
            while texts < WRITE_GROUP_TEXTS and len(group) < most:
                try:
                    _, _, more = self._writes.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                group.append(more)
                texts += len(more.texts)
            try:
                self.sink(group)
            except Exception as exc:
                log.exception("batch sink failed")
                for item in (i for batch in group for waiters in batch.waiters for i in waiters):
                    if not item.future.done():
                        item.future.set_exception(exc)
            finally:
                with self._written:
                    self._unwritten -= len(group)
                    self._written.notify_all()
