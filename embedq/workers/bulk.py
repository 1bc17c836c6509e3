"""One chunk of a job, inside a worker: read, skip stored, claim, embed, count.

`run_chunk` is the whole life of a chunk task:
  1. the job must be running (a cancelled or paused job's chunks do nothing);
  2. read the chunk's (fingerprint, text) items from the database, collapse duplicates;
  3. skip fingerprints already stored, in one query (cached);
  4. claim the rest; won claims are embedded through the runtime's batcher on the job's
     lane, lost ones (computed by someone else right now) are waited for (coalesced);
  5. record the counts in one guarded UPDATE, so a chunk that ran twice counts once.
Vectors never leave the worker through the task: they are in the durable tier.
"""

from __future__ import annotations

import logging
import time

from embedq.cache import HotStore, keys
from embedq.fingerprint import EncodeSpec
from embedq.jobs.store import ChunkCounts, JobStore
from embedq.models.job import CHUNK_DONE
from embedq.tasks import claim as claims
from embedq.workers.runtime import BULK, ONLINE, WorkerRuntime

log = logging.getLogger("embedq.worker.bulk")

POLL_S = 0.1


def run_chunk(runtime: WorkerRuntime, store: JobStore, job_id: str, chunk_no: int
              ) -> dict[str, int]:
    """Run one chunk; return its counts (ids and counts only, never vectors)."""
    job = store.get(job_id)
    chunk = store.chunk(job_id, chunk_no)
    if chunk.status == CHUNK_DONE:
        return {"skipped": 1}
    if job.status != "running":
        return {"skipped": 1}
    spec = EncodeSpec(job.model, job.revision, job.dimensions, job.normalize)
    lane = ONLINE if job.priority == "online" else BULK
    items = store.chunk_items(job_id, chunk.start, chunk.stop)
    text_of: dict[str, str] = dict(items)
    stored = store.stored(list(text_of))
    todo = [fp for fp in text_of if fp not in stored]
    # The owner is the chunk itself: a redelivered chunk (its worker was killed) finds
    # its earlier run's claims and takes them over instead of waiting out their ttl. A
    # copy running at the same time is fenced by the run leases inside embed_pairs.
    owner = f"job-{job_id}-{chunk_no}"
    won, lost = claims.claim(runtime.hot, todo, owner, runtime.settings.claim_ttl_ms)
    holders = runtime.hot.holders([keys.claim(fp) for fp in lost])
    won += [fp for fp, h in zip(lost, holders, strict=True) if h == owner]
    lost = [fp for fp, h in zip(lost, holders, strict=True) if h != owner]
    encoded: set[str] = set()
    failed: dict[str, str] = {}
    pending = list(lost)
    while True:
        if won:
            runtime.embed_pairs(spec, {fp: text_of[fp] for fp in won}, lane)
            got = store.stored(won)
            encoded |= got
            failed.update(_failures(runtime.hot, [fp for fp in won if fp not in got]))
            # Neither stored nor failed: a duplicate execution holds it; wait for it.
            pending += [fp for fp in won if fp not in got and fp not in failed]
        if not pending:
            break
        won = _wait(runtime, store, pending, owner, failed)
        pending = [fp for fp in pending if fp not in won] if won else []
    fresh_lost = set(lost) - encoded
    counts = _count(items, stored, encoded, fresh_lost, failed)
    if failed:
        store.record_failures(job_id, chunk.start, chunk.stop, failed)
    if store.finish_chunk(job_id, chunk_no, counts):
        runtime.hot.incr({"job_items": len(items)})
    return counts.to_json()


def _wait(runtime: WorkerRuntime, store: JobStore, pending: list[str], owner: str,
          failed: dict[str, str]) -> list[str]:
    """Wait until each fingerprint is stored or failed; return orphans we re-claimed."""
    left = list(pending)
    while left:
        done = store.stored(left)
        failed.update(_failures(runtime.hot, [fp for fp in left if fp not in done]))
        left = [fp for fp in left if fp not in done and fp not in failed]
        if not left:
            return []
        orphans = claims.orphaned(runtime.hot, left)
        if orphans:
            still = store.stored(orphans)
            orphans = [fp for fp in orphans if fp not in still]
            won, _ = claims.claim(runtime.hot, orphans, owner, runtime.settings.claim_ttl_ms)
            if won:
                log.warning("chunk re-claims %d fingerprints whose leader vanished", len(won))
                return won
        time.sleep(POLL_S)
    return []


def _failures(hot: HotStore, fps: list[str]) -> dict[str, str]:
    return {fp: f"{info.get('type', 'EmbeddingFailed')}: {info.get('message', '')}"
            for fp, info in zip(fps, hot.get_failures(fps), strict=True) if info}


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
