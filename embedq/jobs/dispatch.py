"""Dispatching jobs: waves of chunk tasks as Celery chords, closed by a callback.

A running job has at most one wave on the broker: a chord of chunk tasks whose callback
(`close`) dispatches the next wave, pauses the job when its window has closed, or
finishes it when no chunk is pending. Bounding the wave bounds how many worker threads one
job holds, so online messages always find a free thread. A wave is as wide as the workers
consuming the job's queue now (CHUNKS_PER_WORKER each, at least `job_wave_chunks`), read
from their heartbeats at every wave, and the last two waves' pending chunks are cut again
into equal ones that fill whole waves: workers started while a job runs take part from its
next wave on, and no worker idles behind a larger chunk.

Every transition is compare-and-set on the job's generation (bumped per wave): a stale
callback (an older wave, a duplicate) changes nothing. `tick` (run by `embedq beat`)
starts queued jobs whose window opened, pauses running jobs whose window closed, and
re-dispatches running jobs that made no progress for `job_stall_s` (their messages died
with a flushed broker or killed workers); chunks already done never run again. A wave
whose chunks are all done but whose callback never came (the broker refused its part
count or its publish: Redis out of memory as the last chunk finished) is closed by the
tick after `close_grace`, not left for the stall rescue. A job that
ends with a `callback_url` gets its first delivery attempt from `finish`; the tick sends
the rest (jobs/callbacks.py), whatever ended the job.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from celery import Celery, chord, group

from embedq.config import Settings
from embedq.coordination import HotStore
from embedq.coordination.store import consumes
from embedq.encoders.catalog import Catalog
from embedq.errors import EmbedqError, Unavailable
from embedq.jobs.callbacks import Callbacks
from embedq.jobs.failures import failure_summary
from embedq.jobs.store import JobStore, Progress, utcnow
from embedq.jobs.windows import Window, may_run
from embedq.models import Job, JobStatus, Priority
from embedq.tasks import names
from embedq.tasks.app import CHUNKS_PER_WORKER
from embedq.tasks.publish import BROKER_ERRORS, broker_error

log = logging.getLogger("embedq.jobs")

Clock = Callable[[], datetime]
# Workers consuming a queue now (their heartbeats), for a wave's width.
WorkerCount = Callable[[str], int]
# A job's running chunks -> items with a vector so far.
ProgressNotes = Callable[[str], dict[int, int]]
# A wave holds CHUNKS_PER_WORKER chunks per live worker on the job's queue, so a worker
# that finishes its chunk while another still runs has the next one (a chord waits for its
# slowest chunk), and at least `job_wave_chunks`; a worker holds no more of them at once.
# A finished wave's close normally comes within milliseconds (its chord callback); the
# tick closes one whose callback was lost no sooner than this after its last chunk.
CLOSE_GRACE_S = 5.0
# Chunks are cut again for a wave only into chunks of at least this many texts: below
# that, a chunk's own bookkeeping (a task, a row, a chord slot) outweighs its texts.
MIN_CHUNK_TEXTS = 64


def job_window(job: Job, settings: Settings) -> Window | None:
    if not job.window:
        return None
    return Window.parse(job.window, job.timezone or settings.jobs.timezone)


def final_status(progress: Progress) -> JobStatus:
    """How a job whose chunks are all done ended, from its item counts."""
    if not progress.failed:
        return JobStatus.SUCCEEDED
    if progress.failed >= progress.total:
        return JobStatus.FAILED
    return JobStatus.SUCCEEDED_WITH_ERRORS


def workers_on(hot: HotStore) -> WorkerCount:
    """Live workers (fresh heartbeats) consuming a queue: those that name it among their
    queues, or name none (they consume the configured online and bulk queues)."""
    def count(queue: str) -> int:
        return sum(1 for info in hot.live_workers().values() if consumes(info, queue))
    return count


class Dispatcher:
    def __init__(self, store: JobStore, app: Celery, settings: Settings,
                 clock: Clock = utcnow, *, inline: bool = False,
                 workers: WorkerCount | None = None,
                 progress_notes: ProgressNotes | None = None) -> None:
        """`inline`: this process runs the chunks itself (the embedded deployment, whose
        in-memory result backend has no chord counter), so no wave is published.
        `workers`: how many workers consume a queue now; without it every wave is
        `job_wave_chunks` wide. `progress_notes`: what running chunks noted so far
        (`HotStore.chunk_progress`), so a job's progress moves per slice."""
        self.inline = inline
        self.workers = workers
        self.progress_notes = progress_notes
        self.store = store
        self.app = app
        self.settings = settings
        self.clock = clock
        self.callbacks = Callbacks(store, settings, self.describe, clock)

    @functools.cached_property
    def catalog(self) -> Catalog:
        return Catalog(self.settings)

    def model_label(self, job: Job) -> str:
        """The job's model as clients name it: with EMBEDQ_MODELS its served name (and
        tier), else the model its fingerprints name, as always."""
        served = self.catalog.route(job.model, job.revision) if self.catalog.several else None
        if served is None:
            return job.model
        tier = next(t for t, r in served.revisions.items() if r == job.revision)
        return served.label(tier)

    def describe(self, job_id: str) -> dict[str, Any]:
        """The job as the API, `embedq jobs status`, event streams and callbacks show it."""
        job = self.store.get(job_id)
        progress = self.store.progress(job, self._running(job))
        waiting: str | None = None
        if job.status == JobStatus.QUEUED and job.loaded:
            try:
                due, when = self.due(job, self.clock())
            except EmbedqError:
                due, when = False, None  # e.g. a zone this machine lacks: the tick fails it
            waiting = when.isoformat() if when is not None and not due else None
        state: dict[str, Any] = {
            "id": job.id,
            "object": "job",
            "status": job.status,
            "priority": job.priority,
            "model": self.model_label(job),
            "revision": job.revision,
            "source": job.source,
            "window": job.window,
            "timezone": job.timezone,
            "waiting_until": waiting,
            "loaded": job.loaded,
            "progress": progress.to_json(),
            "error": job.error,
            "created_at": _iso(job.created_at),
            "started_at": _iso(job.started_at),
            "finished_at": _iso(job.finished_at),
        }
        if job.callback_url:
            state["callback"] = {"state": job.callback_state,
                                 "attempts": job.callback_attempts,
                                 "error": job.callback_error}
        return state

    def due(self, job: Job, now: datetime) -> tuple[bool, datetime | None]:
        return may_run(job_window(job, self.settings), job.not_before, now)

    def start(self, job_id: str, now: datetime | None = None) -> bool:
        """Start a queued job if its window is open; True when a wave was dispatched."""
        job = self.store.get(job_id)
        now = now or self.clock()
        if job.status != JobStatus.QUEUED or not job.loaded or not self.due(job, now)[0]:
            return False
        generation = job.generation + 1
        started = {"started_at": job.started_at or now}
        if not self.store.transition(job.id, [JobStatus.QUEUED], job.generation,
                                     status=JobStatus.RUNNING,
                                     generation=generation, progress_at=now, **started):
            return False
        self.wave(job.id, generation)
        return True

    def queue_of(self, job: Job) -> str:
        """The queue of a job's chunks: its model's (with EMBEDQ_MODELS each model has its
        own), online or bulk by its priority."""
        served = self.catalog.route(job.model, job.revision)
        queues = served.settings.queue if served is not None else self.settings.queue
        return queues.online_queue if job.priority == Priority.ONLINE else queues.bulk_queue

    def wave(self, job_id: str, generation: int) -> int:
        """Publish the next wave as a chord; finish the job when nothing is pending."""
        if self.inline:
            return 0  # this process runs its chunks itself (JobService.run_here)
        job = self.store.get(job_id)
        queue = self.queue_of(job)
        chunks = self.store.next_wave(job_id, self.wave_width(queue), MIN_CHUNK_TEXTS,
                                      self.settings.jobs.chunk_max_texts)
        if not chunks:
            self.finish(job_id, generation)
            return 0
        headers = group(
            self.app.signature(names.BULK_CHUNK, args=[job_id, c, generation], queue=queue,
                               immutable=True)
            for c in chunks
        )
        body = self.app.signature(names.CLOSE_JOB, args=[job_id, generation], queue=queue,
                                  immutable=True)
        try:
            chord(headers, body, app=self.app).apply_async()
        except BROKER_ERRORS as exc:
            # Back to queued: the next tick dispatches it again once the broker is back.
            self.store.transition(job_id, [JobStatus.RUNNING], generation,
                                  status=JobStatus.QUEUED)
            raise broker_error(exc, "the job stays queued and `embedq beat` dispatches "
                                    "it") from exc
        log.info("job %s wave %d: chunks %s on %s", job_id, generation, chunks, queue)
        return len(chunks)

    def _running(self, job: Job) -> dict[int, int] | None:
        """What the running chunks noted so far (None: not running, or unknown)."""
        if job.status != JobStatus.RUNNING or self.progress_notes is None:
            return None
        try:
            return self.progress_notes(job.id)
        except EmbedqError as exc:
            log.debug("chunk progress unknown: %s", exc)
            return None

    def wave_width(self, queue: str) -> int:
        """Chunks in the next wave: CHUNKS_PER_WORKER per worker on `queue` now, at least
        `job_wave_chunks`. Read at every wave, so workers added while a job runs are used
        from its next wave on; a hot store that cannot be read leaves the default."""
        floor = self.settings.jobs.wave_chunks
        if self.workers is None:
            return floor
        try:
            live = self.workers(queue)
        except Unavailable as exc:
            log.warning("live workers unknown (%s): a wave of %d chunks", exc, floor)
            return floor
        return max(floor, CHUNKS_PER_WORKER * live)

    def close(self, job_id: str, generation: int, now: datetime | None = None) -> str:
        """The chord callback: next wave, pause, or finish. Idempotent; returns what it did."""
        job = self.store.get(job_id)
        if job.status != JobStatus.RUNNING or job.generation != generation:
            return "stale"
        now = now or self.clock()
        if not self.store.pending_chunks(job_id, 1):
            return "finished" if self.finish(job_id, generation) else "stale"
        if not self.due(job, now)[0]:
            paused = self.store.transition(job_id, [JobStatus.RUNNING], generation,
                                           status=JobStatus.QUEUED)
            return "paused" if paused else "stale"
        if not self.store.transition(job_id, [JobStatus.RUNNING], generation,
                                     generation=generation + 1, progress_at=now):
            return "stale"
        self.wave(job_id, generation + 1)
        return "next"

    def finish(self, job_id: str, generation: int) -> bool:
        """Close a job with no pending chunk: succeeded, succeeded_with_errors when some
        items failed (`progress.failed` counts them), failed when every item did; with
        failures, the job's `error` says how many and why (`failures.failure_summary`)."""
        job = self.store.get(job_id)
        progress = self.store.progress(job)
        said: dict[str, Any] = {}
        why = failure_summary(self.store.db, job_id, progress.failed, progress.total)
        if why is not None:  # after what loading said (a bad line), never in its place
            said["error"] = f"{job.error}; {why}" if job.error else why
        finished = self.store.transition(job_id, [JobStatus.RUNNING], generation,
                                         status=final_status(progress),
                                         finished_at=self.clock(), **said)
        if finished and job.callback_url:
            try:
                self.callbacks.deliver(job_id)
            except Exception:
                # The job is closed either way; the tick retries the pending delivery.
                log.exception("job %s: first callback attempt failed", job_id)
        return finished

    def tick(self, now: datetime | None = None) -> dict[str, int]:
        """Start due jobs, pause jobs outside their window, rescue stalled ones, fail
        jobs whose loading stopped, send due callbacks. Each job on its own, loaded on its
        own: a row that cannot even be loaded, or one that raises, is logged and marked
        failed, and the others go on; an unreachable broker or database leaves a job as it
        is for the next tick."""
        now = now or self.clock()
        counts = {"started": 0, "paused": 0, "closed": 0, "rescued": 0, "failed": 0,
                  "abandoned": len(self._fail_stale_loading(now))}
        for job_id in self.store.ids_in(JobStatus.active()):
            try:
                self._tick_job(self.store.get(job_id), now, counts)
            except Unavailable as exc:
                log.warning("job %s not dispatched: %s", job_id, exc)
            except Exception as exc:
                # One bad row (a hostile schedule, an unknown time zone, a value an older
                # release stored that no driver loads) must not stop every other job from
                # starting, pausing or being rescued.
                log.exception("job %s cannot be scheduled: marking it failed", job_id)
                counts["failed"] += self.store.transition(
                    job_id, JobStatus.active(), None, status=JobStatus.FAILED,
                    finished_at=now, error=f"cannot be scheduled: {exc}"[:2000])
        try:
            delivered = self.callbacks.run_due(now)
        except Unavailable as exc:
            log.warning("callbacks not sent: %s", exc)
        else:
            counts.update({f"callbacks_{k}": v for k, v in delivered.items()})
        return counts

    def _tick_job(self, job: Job, now: datetime, counts: dict[str, int]) -> None:
        stall = timedelta(seconds=self.settings.jobs.stall_s)
        if job.status == JobStatus.QUEUED:
            counts["started"] += self.start(job.id, now)
        elif not self.due(job, now)[0]:
            counts["paused"] += self.store.transition(
                job.id, [JobStatus.RUNNING], job.generation, status=JobStatus.QUEUED)
        elif job.progress_at is None or job.progress_at + stall <= now:
            log.warning("job %s made no progress for %.0f s: dispatching again",
                        job.id, self.settings.jobs.stall_s)
            if self.store.transition(job.id, [JobStatus.RUNNING], job.generation,
                                     generation=job.generation + 1, progress_at=now):
                self.wave(job.id, job.generation + 1)
                counts["rescued"] += 1
        elif (job.progress_at + self.close_grace() <= now
              and not self.store.sent_chunks(job.id)):
            # Every chunk of the wave is done, and its close never came: the chord's
            # callback was lost (a broker refusing writes as the last chunk finished).
            log.warning("job %s: its wave finished and was not closed: closing it", job.id)
            counts["closed"] += self.close(job.id, job.generation, now) != "stale"

    @staticmethod
    def close_grace_s(settings: Settings) -> float:
        """How long a finished wave waits for its chord callback before the tick closes
        it: two ticks, at least CLOSE_GRACE_S. A callback that arrives later is stale."""
        return max(CLOSE_GRACE_S, 2 * settings.jobs.tick_s)

    def close_grace(self) -> timedelta:
        return timedelta(seconds=self.close_grace_s(self.settings))

    def _fail_stale_loading(self, now: datetime) -> list[str]:
        """Fail the jobs whose inputs stopped arriving EMBEDQ_JOB_LOAD_TIMEOUT_S ago."""
        timeout_s = self.settings.jobs.load_timeout_s
        try:
            failed = self.store.fail_stale_loading(
                now - timedelta(seconds=timeout_s), now,
                f"the submission stopped before every input was stored (no input arrived "
                f"for {timeout_s:.0f} s: its submitter died or lost the database), so the "
                "job never ran: submit it again")
        except Unavailable as exc:
            log.warning("stale submissions not checked: %s", exc)
            return []
        for job_id in failed:
            log.warning("job %s: its inputs stopped arriving %.0f s ago: marked failed "
                        "(EMBEDQ_JOB_LOAD_TIMEOUT_S)", job_id, timeout_s)
        return failed


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None

