"""The task bodies, bound to one Celery app and one worker runtime.

`register(app, runtime)` defines on `app` the tasks named in `embedq.tasks.names`; each
body closes over `runtime`, so no process-global registry is needed and two embedded
workers in one process (each with its own app) never see each other's runtime. Workers
run them on `AppThreadPool`, whose threads trace tasks with their own worker's app. Bodies are
thin: they unpack ids and payloads and call the runtime, the chunk runner or the
dispatcher. Chunk tasks carry (job id, chunk number, generation) and return counts, never
vectors; the wave callback reads the truth from the database.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from celery import Celery, Task
from celery.concurrency.thread import TaskPool as ThreadTaskPool
from celery.exceptions import Reject

from embedq.errors import Unavailable
from embedq.jobs.dispatch import Dispatcher, workers_on
from embedq.jobs.store import ChunkCounts, JobStore
from embedq.tasks import names
from embedq.workers.chunk import run_chunk
from embedq.workers.runtime import WorkerRuntime

log = logging.getLogger("embedq.worker.tasks")

# shared=False: Celery's default (shared) would also bind these bodies, and the runtime
# they close over, to every app finalized later in this process.
_LATE = {"bind": True, "shared": False, "acks_late": True, "reject_on_worker_lost": True}
class KeptOnFailedRetry(Task):  # type: ignore[misc]
    """A task whose retry, when it cannot be published, puts its message back instead of
    dropping it.

    A task that meets an unreachable or full Redis (Unavailable) is retried by publishing
    a copy; when that publish fails too, Celery rejects the message without requeueing
    it, and it is gone: an online text waits out its claim, a job's chunk waits for beat's
    stall rescue. Requeued instead, the message goes back on its queue, or, while Redis
    refuses the requeue (out of memory), keeps its unacknowledged record for the
    visibility sweep to restore once Redis takes writes again."""

    def retry(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().retry(*args, **kwargs)
        except Reject as exc:
            if exc.requeue:
                raise
            log.warning("task %s[%s]: its retry could not be published (%s): its message "
                        "is requeued", self.name, self.request.id, exc.reason)
            raise Reject(exc.reason, requeue=True) from exc


_RETRY = {
    "base": KeptOnFailedRetry,
    "autoretry_for": (Unavailable,),
    "retry_backoff": 1,
    "retry_backoff_max": 30,
}


class AppThreadPool(ThreadTaskPool):  # type: ignore[misc]
    """Celery's threads pool, whose threads run tasks with this worker's app.

    Celery looks a task up in the executing thread's current app (thread-local); the stock
    pool's threads have none and fall back to the process's default app, which does not
    hold the bodies `register` bound to this app.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Replaces the stock executor before it ever ran a thread.
        self.executor = ThreadPoolExecutor(max_workers=self.limit,
                                           initializer=self.app.set_current)


def register(app: Celery, runtime: WorkerRuntime) -> None:
    """Bind embedq's task bodies to `app`, each running on `runtime`."""

    @app.task(name=names.EMBED, ignore_result=True, max_retries=30,  # type: ignore[untyped-decorator]
              **_LATE, **_RETRY)
    def embed(task: Any, payload: dict[str, Any]) -> dict[str, int]:
        """Embed the (fingerprint, text) pairs of one online message."""
        redelivered = bool((task.request.delivery_info or {}).get("redelivered"))
        return runtime.handle_embed(
            payload, first_delivery=not redelivered and not task.request.retries)

    @app.task(name=names.BULK_CHUNK, max_retries=60,  # type: ignore[untyped-decorator]
              **_LATE, **_RETRY)
    def bulk_chunk(task: Any, job_id: str, chunk: int, generation: int) -> dict[str, int]:
        """Embed one chunk of a job; a second run of a finished chunk does nothing."""
        store = JobStore(runtime.db)
        try:
            return run_chunk(runtime, store, job_id, chunk)
        except Unavailable:
            raise
        except Exception as exc:
            # A chunk that can never succeed must not stall its job: fail its items.
            log.exception("job %s chunk %d (wave %d) failed", job_id, chunk, generation)
            row = store.chunk(job_id, chunk)
            message = f"EmbeddingFailed: the chunk task failed: {exc}"
            items = store.chunk_items(job_id, row.start, row.stop)
            store.record_failures(job_id, row.start, row.stop,
                                  {fp: message for fp, _ in items})
            store.finish_chunk(job_id, chunk, ChunkCounts(failed=len(items)))
            return {"failed": len(items)}

    @app.task(name=names.CLOSE_JOB, ignore_result=True, max_retries=60,  # type: ignore[untyped-decorator]
              **_LATE, **_RETRY)
    def close_job(task: Any, job_id: str, generation: int) -> str:
        """The wave's chord callback: dispatch the next wave, pause, or finish the job."""
        return dispatcher(task).close(job_id, generation)

    @app.task(name=names.JOBS_TICK, bind=True, shared=False,  # type: ignore[untyped-decorator]
              ignore_result=True)
    def jobs_tick(task: Any) -> dict[str, int]:
        """Sent by `embedq beat`: start due jobs, pause closed windows, rescue stalls."""
        return dispatcher(task).tick()

    def dispatcher(task: Any) -> Dispatcher:
        return Dispatcher(JobStore(runtime.db), task.app, runtime.settings,
                          workers=workers_on(runtime.hot),
                          progress_notes=runtime.hot.chunk_progress)

    del embed, bulk_chunk, close_job, jobs_tick  # registered on the app by the decorator
