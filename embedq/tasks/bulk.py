"""Job tasks: a chunk (chord header), the wave callback, and the periodic tick.

Shared tasks, bound to every embedq app (importing this module from
`embedq.tasks.definitions` defines them). Thin: each unpacks ids and calls the
worker-side chunk logic or the dispatcher. Chunk
tasks carry (job id, chunk number, generation) and return counts, never vectors; the
callback receives only those counts and reads the truth from the database.
"""

from __future__ import annotations

import logging

from celery import Task, shared_task

from embedq.errors import Unavailable
from embedq.jobs.dispatch import Dispatcher
from embedq.jobs.store import ChunkCounts, JobStore
from embedq.tasks import names
from embedq.workers import runtime

log = logging.getLogger("embedq.tasks.bulk")

_RETRY = {
    "autoretry_for": (Unavailable,),
    "retry_backoff": 1,
    "retry_backoff_max": 30,
    "max_retries": 60,
}


@shared_task(  # type: ignore[untyped-decorator]
    name=names.BULK_CHUNK, bind=True, acks_late=True, reject_on_worker_lost=True, **_RETRY,
)
def bulk_chunk(task: Task, job_id: str, chunk: int, generation: int) -> dict[str, int]:
    """Embed one chunk of a job; a second run of a finished chunk does nothing."""
    from embedq.workers.bulk import run_chunk

    current = runtime.current(task.request.hostname)
    store = JobStore(current.db)
    try:
        return run_chunk(current, store, job_id, chunk)
    except Unavailable:
        raise
    except Exception as exc:
        # A chunk that can never succeed must not stall its job: fail its items.
        log.exception("job %s chunk %d (wave %d) failed", job_id, chunk, generation)
        row = store.chunk(job_id, chunk)
        message = f"EmbeddingFailed: the chunk task failed: {exc}"
        items = store.chunk_items(job_id, row.start, row.stop)
        store.record_failures(job_id, row.start, row.stop, {fp: message for fp, _ in items})
        store.finish_chunk(job_id, chunk, ChunkCounts(failed=len(items)))
        return {"failed": len(items)}


@shared_task(  # type: ignore[untyped-decorator]
    name=names.CLOSE_JOB, bind=True, acks_late=True, reject_on_worker_lost=True,
    ignore_result=True, **_RETRY,
)
def close_job(task: Task, job_id: str, generation: int) -> str:
    """The wave's chord callback: dispatch the next wave, pause, or finish the job."""
    current = runtime.current(task.request.hostname)
    return Dispatcher(JobStore(current.db), task.app, current.settings).close(job_id, generation)


@shared_task(name=names.JOBS_TICK, bind=True, ignore_result=True)  # type: ignore[untyped-decorator]
def jobs_tick(task: Task) -> dict[str, int]:
    """Sent by `embedq beat`: start due jobs, pause closed windows, rescue stalls."""
    current = runtime.current(task.request.hostname)
    return Dispatcher(JobStore(current.db), task.app, current.settings).tick()
