"""One chunk of a job, inside a worker: read, claim, embed (or find stored), count.

`run_chunk` is the whole life of a chunk task:
  1. the job must be running (a cancelled or paused job's chunks do nothing);
  2. read the chunk's (fingerprint, text) items from the database, collapse duplicates;
  3. per slice of SLICE_TEXTS fingerprints (two slices in flight): claim them; won claims
     go to the runtime, which finds under the run leases those already stored (cached;
     one durable lookup a text) and embeds the rest through the batcher on the job's
     lane; lost ones (computed by someone else right now) are waited for (coalesced);
  4. record the counts in one guarded UPDATE, so a chunk that ran twice counts once.
Vectors never leave the worker through the task: they are in the durable store.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from embedq import stages
from embedq.coordination.outcomes import describe, read_outcomes
from embedq.coordination.waiting import CHUNK
from embedq.errors import EmbedqError
from embedq.fingerprint import EncodeSpec
from embedq.jobs.store import ChunkCounts, JobStore
from embedq.models import ChunkStatus, JobStatus, Priority
from embedq.workers.batcher import Batcher
from embedq.workers.items import Room
from embedq.workers.runtime import BULK, ONLINE, WorkerRuntime

log = logging.getLogger("embedq.worker.bulk")

# A chunk hands the batcher SLICE_TEXTS texts at a time, SLICES_IN_FLIGHT slices at once:
# the claims, leases and queries of a slice are short bursts of Python work (holding the
# GIL that online messages in the same process need), not one long burst per chunk, and
# the batcher still has every running chunk's slices to sort into full batches. With small
# batches a chunk's first slices hold the batcher's low water (`first_slice_texts`).
SLICE_TEXTS = 256
SLICES_IN_FLIGHT = 2
PROGRESS_TTL_S = 3600  # a running job's per-slice notes outlive any one chunk


def run_chunk(runtime: WorkerRuntime, store: JobStore, job_id: str, chunk_no: int
              ) -> dict[str, int]:
    """Run one chunk; return its counts (ids and counts only, never vectors)."""
    job = store.get(job_id)
    chunk = store.chunk(job_id, chunk_no)
    if chunk.status == ChunkStatus.DONE:
        return {"skipped": 1}
    if job.status != JobStatus.RUNNING:
        return {"skipped": 1}
    spec = EncodeSpec(job.model, job.revision, job.dimensions, job.normalize)
    lane = ONLINE if job.priority == Priority.ONLINE else BULK
    items = store.chunk_items(job_id, chunk.start, chunk.stop)
    text_of: dict[str, str] = dict(items)
    # The owner is the chunk itself: a redelivered chunk (its worker was killed) finds
    # its earlier run's claims and takes them over instead of waiting out their ttl. A
    # copy running at the same time is fenced by the run leases inside embed_pairs.
    owner = f"job-{job_id}-{chunk_no}"
    fps = list(text_of)
    parts = [{fp: text_of[fp] for fp in fps[i:j]} for i, j in _bounds(
        len(fps), first_slice_texts(runtime, spec))]

    progress = _Progress(runtime, job_id, chunk_no, items)

    def run(part: dict[str, str]) -> _Slice:
        ran = _run_slice(runtime, spec, lane, owner, part)
        progress.add(ran)
        return ran

    total = _Slice()
    if len(parts) <= 1:
        slices = [run(part) for part in parts]
    else:
        with ThreadPoolExecutor(SLICES_IN_FLIGHT, f"embedq-chunk-{chunk_no}") as pool:
            slices = list(pool.map(run, parts))
    for part in slices:
        total.merge(part)
    counts = _count(items, total.stored, total.encoded, total.lost, total.failed)
    if total.failed:
        store.record_failures(job_id, chunk.start, chunk.stop, total.failed)
    if store.finish_chunk(job_id, chunk_no, counts):
        runtime.hot.incr({"job_items": len(items)})
    return counts.to_json()


def first_slice_texts(runtime: WorkerRuntime, spec: EncodeSpec) -> int:
    """Texts each of a chunk's first SLICES_IN_FLIGHT slices sets up: the batcher's low
    water (4 batches) when that is under SLICE_TEXTS. Chunks of a wave start together in
    every worker: with 16-text batches (an upstream's, 100 ms a call) two 256-text slices
    set up 32 batches of work in one burst, in eight workers at once, and online misses
    waited for the two cores (bench scale: the slowest probes at 8 workers at the chunks'
    starts). Later slices start one by one as each batcher runs low, so they keep
    SLICE_TEXTS: 64-text slices throughout cost one worker 8% of its texts/s."""
    served = runtime.serving(spec)
    if served is None:
        return SLICE_TEXTS
    return max(1, min(SLICE_TEXTS, served.batcher.low_water))


def _bounds(n: int, first: int) -> list[tuple[int, int]]:
    """[start, stop) of each slice of n texts: SLICES_IN_FLIGHT of `first`, then SLICE_TEXTS."""
    bounds: list[tuple[int, int]] = []
    start = 0
    while start < n:
        size = first if len(bounds) < SLICES_IN_FLIGHT else SLICE_TEXTS
        bounds.append((start, min(n, start + size)))
        start += size
    return bounds


class _Progress:
    """Tells the hot store, after each slice, how many of the chunk's items have a vector
    so far: a job's progress moves per slice (a few model batches), not per chunk. A note
    that cannot be written is skipped: the chunk row says it all once the chunk is done."""

    def __init__(self, runtime: WorkerRuntime, job_id: str, chunk_no: int,
                 items: list[tuple[str, str]]) -> None:
        self.runtime, self.job_id, self.chunk_no = runtime, job_id, chunk_no
        self.occurrences = Counter(fp for fp, _ in items)
        self.done = 0
        self._lock = threading.Lock()

    def add(self, ran: _Slice) -> None:
        got = ran.stored | ran.encoded | ran.lost
        with self._lock:
            self.done += sum(self.occurrences[fp] for fp in got if fp not in ran.failed)
            done = self.done
        try:
            self.runtime.hot.note_chunk_progress(self.job_id, self.chunk_no, done,
                                                 PROGRESS_TTL_S)
        except EmbedqError as exc:
            log.debug("chunk progress not noted: %s", exc)


@dataclass
class _Slice:
    """What became of a slice's fingerprints: stored before, encoded here, computed by
    someone else while we waited (lost), failed."""

    stored: set[str] = field(default_factory=set)
    encoded: set[str] = field(default_factory=set)
    lost: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)

    def merge(self, other: _Slice) -> None:
        self.stored |= other.stored
        self.encoded |= other.encoded
        self.lost |= other.lost
        self.failed.update(other.failed)


def _run_slice(runtime: WorkerRuntime, spec: EncodeSpec, lane: int,
               owner: str, text_of: dict[str, str]) -> _Slice:
    """Claim, embed what we won (finding what is stored), wait for what others hold."""
    # A bulk slice is set up only when the batcher runs low, one slice at a time: the
    # slices of a wave start one by one as the model needs them, not in one burst that
    # online work in this process would feel.
    # The batcher of the job's tier (its revision); a tier not served here gets no room,
    # and embed_pairs refuses its texts with a message naming the served revisions.
    served = runtime.serving(spec)
    batcher = served.batcher if served is not None else None
    room = batcher.reserve(BULK, len(text_of)) if batcher is not None and lane == BULK \
        else None
    try:
        return _claim_and_embed(runtime, spec, lane, owner, text_of, batcher, room)
    finally:
        if batcher is not None and room is not None:
            batcher.release(room)


def _claim_and_embed(runtime: WorkerRuntime, spec: EncodeSpec, lane: int, owner: str,
                     text_of: dict[str, str], batcher: Batcher | None,
                     room: Room | None) -> _Slice:
    out = _Slice()
    # A claim this chunk's owner holds already (an earlier run of it) is won again. What
    # is stored already is found under the run lease (one durable lookup a text): a text
    # another execution stored after any earlier look is found there too.
    with stages.timed("chunk"):
        claimed = runtime.hot.claim(list(text_of), owner,
                                    runtime.settings.queue.claim_ttl_ms)
    won, lost = claimed.won, claimed.lost
    if not won and batcher is not None and room is not None:
        batcher.release(room)  # nothing to encode here: let the next slice in
    pending = list(lost)
    while True:
        if won:
            ran = runtime.embed_pairs(spec, {fp: text_of[fp] for fp in won}, lane, room)
            if batcher is not None and room is not None:
                batcher.release(room)  # filled by the submit, or never needed
            out.stored |= ran.reused
            out.encoded |= ran.done - ran.reused
            rest = [fp for fp in won if fp not in ran.done]
            with stages.timed("chunk"):
                failed = read_outcomes(runtime.hot, rest)[1] if rest else {}
            out.failed.update({fp: describe(e) for fp, e in failed.items()})
            # Neither done nor failed: a duplicate execution holds it; wait for it.
            pending += [fp for fp in rest if fp not in out.failed]
        if not pending:
            break
        won = _wait(runtime, pending, owner, out.failed)
        pending = [fp for fp in pending if fp not in won] if won else []
    out.lost = set(lost) - out.encoded - out.stored
    return out


def _wait(runtime: WorkerRuntime, pending: list[str], owner: str,
          failed: dict[str, str]) -> list[str]:
    """Wait until each fingerprint is stored or failed ([]), or until this chunk
    re-claims orphans (their leader vanished): returns those, to encode here. Orphans
    someone else claimed first are waited for again."""
    while True:
        got = runtime.waiting.wait(pending, CHUNK)
        failed.update({fp: describe(e) for fp, e in got.failures.items()})
        if not got.orphans:
            return []
        won = runtime.hot.claim(got.orphans, owner, runtime.settings.queue.claim_ttl_ms).won
        if won:
            log.warning("chunk re-claims %d fingerprints whose leader vanished", len(won))
            return won
        pending = got.orphans + got.pending


def _count(items: list[tuple[str, str]], stored: set[str], encoded: set[str],
           lost: set[str], failed: dict[str, str]) -> ChunkCounts:
    """Per item: cached (stored before), coalesced (a duplicate, or joined in-flight
    work), failed; done = every item with a vector. encoded = distinct texts computed."""
    seen: set[str] = set()
    done = cached = coalesced = n_failed = 0
    for fp, _ in items:
        first = fp not in seen
        seen.add(fp)
        if fp in failed:
            n_failed += 1
            continue
        done += 1
        if fp in stored:
            cached += 1
        elif not first or fp in lost:
            coalesced += 1
    return ChunkCounts(encoded=len(encoded), done=done, cached=cached, coalesced=coalesced,
                       failed=n_failed)
