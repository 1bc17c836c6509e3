"""JobService: submit, inspect, cancel and collect jobs.

A job is accepted once its row, its items (index, external id, text, fingerprint) and its
chunks are committed: only then does `submit` return an id, so a database outage before
that point loses nothing that was acknowledged, and nothing after it can lose the job
(Redis and the broker hold only copies of work that can be dispatched again).

Items are stored as they stream in, `PAGE_ITEMS` per transaction; chunks are cut by an
estimated token budget (`job_chunk_tokens`) and a text count (`job_chunk_max_texts`).
A file with a bad line keeps every line before it: the job is sealed with those items
and the error, and the error is raised naming the line.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any, Protocol

from celery import Celery

from embedq.config import Settings
from embedq.coordination import HotStore
from embedq.encoders.tiers import TIERS
from embedq.errors import (
    BadInputFile,
    EmbedqError,
    InputFileTooLarge,
    InputTooLarge,
    InvalidInput,
    NotFound,
    QueueLimitReached,
)
from embedq.fingerprint import EncodeSpec, fingerprint
from embedq.jobs.callbacks import check_url
from embedq.jobs.dispatch import Clock, Dispatcher, job_window, workers_on
from embedq.jobs.items import ItemRow
from embedq.jobs.readers import Record
from embedq.jobs.store import JobStore, Progress, ResultRow, utcnow
from embedq.jobs.windows import Window, check_not_before
from embedq.limits import check_input_chars, check_moment, check_text
from embedq.models import DEFAULT_TENANT, ChunkStatus, Database, Job, JobStatus, Priority
from embedq.models.job import CallbackState

log = logging.getLogger("embedq.jobs")

PAGE_ITEMS = 2000


def estimate_tokens(text: str) -> int:
    """Tokens a text will cost, without loading a tokenizer (about 4 bytes a token,
    capped at a typical 512-token model window)."""
    return min(len(text.encode("utf-8")) // 4 + 2, 512)


class Producer(Protocol):
    """What jobs need from the embedding service (`EmbeddingService` has it)."""

    settings: Settings
    db: Database
    app: Celery
    hot: HotStore

    def spec(self, model: str | None = None, dimensions: int | None = None,
             normalize: bool | None = None, precision: str | None = None,
             tenant: str | None = None) -> EncodeSpec: ...


# Runs one chunk in this process: the embedded deployment's worker (see run_here).
ChunkRunner = Callable[[JobStore, str, int], None]


class JobService:
    def __init__(self, service: Producer, clock: Clock = utcnow, *,
                 run_chunk: ChunkRunner | None = None) -> None:
        self.service = service
        self.settings = service.settings
        self.store = JobStore(service.db)
        self.dispatcher = Dispatcher(self.store, service.app, self.settings, clock,
                                     inline=run_chunk is not None,
                                     workers=workers_on(service.hot),
                                     progress_notes=service.hot.chunk_progress)
        self.clock = clock
        self.run_chunk = run_chunk

    # --- submitting
    def submit(
        self,
        records: Iterable[Record | str],
        *,
        model: str | None = None,
        dimensions: int | None = None,
        precision: str | None = None,
        priority: str = Priority.BULK,
        window: str | None = None,
        timezone: str | None = None,
        not_before: datetime | None = None,
        source: str | None = None,
        on_saved: Callable[[str], None] | None = None,
        start: bool = True,
        callback_url: str | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> str:
        """Store a job and its items, then start it if its window is open; return its id.

        `on_saved(job_id)` is called once the job row exists, before items load, so a
        caller can name the job in an error about a bad line. With `callback_url` the
        job's final state is POSTed there once it ends (jobs/callbacks.py); a URL this
        server may not call is refused before anything is stored. The tier is `precision`,
        or the model's suffix (`all-MiniLM-L6-v2:int8`), else EMBEDQ_JOB_PRECISION, else
        the deployment's default; the job's revision names it. The job belongs to
        `tenant`: reads that name another tenant answer NotFound, and its inputs count
        towards the tenant's EMBEDQ_TENANT_MAX_QUEUED_INPUTS while it is unfinished
        (QueueLimitReached past it: inputs held in memory are refused before anything is
        stored, a stream when it passes the cap; its job is then failed, and no other
        job is touched).
        """
        not_before = self._check_delivery(callback_url, priority, not_before)
        if precision is None and (model or "").rpartition(":")[2] not in TIERS:
            precision = self.settings.jobs.precision  # None: the deployment's default tier
        spec = self.service.spec(model, dimensions, precision=precision, tenant=tenant)
        window, tz = self._window(window, timezone)
        if isinstance(records, list | tuple):
            # Inputs held in memory are all checked before the job exists: a bad one is
            # refused with no job row left behind. A stream is checked line by line.
            records = [checked_record(r, n, self.settings) for n, r in enumerate(records)]
        room = self.check_room(tenant, len(records) if isinstance(records, list) else 1)
        job_id = uuid.uuid4().hex
        self.store.create(Job(
            id=job_id, tenant=tenant, status=JobStatus.QUEUED, priority=priority, model=spec.model,
            revision=spec.revision, dimensions=spec.dimensions, normalize=spec.normalize,
            source=(source or "")[:255] or None, window=window, timezone=tz if window else None,
            not_before=not_before, total=0, chunks=0, loaded=False, generation=0,
            progress_at=utcnow(),  # loading: the last page stored (fail_stale_loading)
            callback_url=callback_url,
            callback_state=CallbackState.PENDING if callback_url else None,
        ))
        if on_saved is not None:
            on_saved(job_id)
        loader = _Loader(self, job_id, spec, tenant, room, checked=isinstance(records, list))
        self._load(job_id, records, loader, start)
        return job_id

    def _check_delivery(self, callback_url: str | None, priority: str,
                        not_before: datetime | None) -> datetime | None:
        """Refuse a callback URL this server may not call, an unknown priority, and a
        `not_before` too far ahead or out of range; return `not_before` in UTC."""
        if callback_url is not None:
            check_url(check_text(callback_url, "callback_url"), self.settings)
        if priority not in set(Priority):
            raise InvalidInput(f"priority {priority!r} is unknown: use online or bulk",
                               "priority")
        check_not_before(not_before, self.clock())
        return check_moment(not_before, "not_before")

    def _window(self, window: str | None, timezone: str | None) -> tuple[str | None, str]:
        """(the off-peak window in its canonical form, or None; the timezone it opens in:
        `timezone`, else EMBEDQ_JOB_TIMEZONE). A timezone without a window is refused."""
        if timezone is not None and not window:
            raise InvalidInput(
                f"timezone {timezone!r} was given without a window; it only says when an "
                "off-peak window opens: give window too, or leave timezone out", "timezone")
        tz = timezone or self.settings.jobs.timezone
        if window:
            window = str(Window.parse(window, tz))
        return window, tz

    def _load(self, job_id: str, records: Iterable[Record | str], loader: _Loader,
              start: bool) -> None:
        """Load the stored job's items and seal it, then start it (when `start`). Past the
        tenant's queue cap the job fails; at a bad input line the lines before it still
        run. Either error is raised on."""
        try:
            for n, record in enumerate(records):
                loader.add(record, n)
        except QueueLimitReached as exc:
            loader.seal(error=str(exc))
            self.store.transition(job_id, JobStatus.active(), None, status=JobStatus.FAILED,
                                  finished_at=self.clock())
            raise
        except BadInputFile as exc:
            loader.seal(error=str(exc))
            if start and loader.count:
                self.start(job_id)  # the lines before the bad one run; nothing is lost
            raise
        loader.seal()
        if start:
            self.start(job_id)

    def check_room(self, tenant: str, inputs: int) -> int:
        """How many inputs `tenant`'s unfinished jobs may still take; QueueLimitReached
        when that is fewer than `inputs`. Concurrent submissions of one tenant each see
        the room before the others load, so together they may pass the cap once."""
        cap = self.settings.tenants.max_queued_inputs
        queued = self.store.queued_inputs(tenant)
        if queued + inputs > cap:
            raise queue_full(tenant, queued, inputs, cap)
        return cap - queued

    def start(self, job_id: str) -> bool:
        """Dispatch the job's first wave if it may run now. Inline (embedded: no worker
        outlives this process), a thread of this process runs the job, waiting for its
        window if it has one."""
        if self.run_chunk is not None:
            threading.Thread(target=self.run_here, args=(job_id,), daemon=True,
                             name=f"embedq-job-{job_id[:8]}").start()
            return True
        try:
            return self.dispatcher.start(job_id)
        except EmbedqError:
            return False  # stays queued in the database; `embedq beat` dispatches it

    # --- embedded mode: chords need a result backend with counters, which the in-process
    # cache backend lacks, so the embedded process runs the chunks itself, in order.
    def run_here(self, job_id: str, poll_s: float = 1.0) -> None:
        if self.run_chunk is None:
            raise RuntimeError("run_here needs a chunk runner: build jobs with "
                               "Deployment.jobs() in embedded mode")
        while True:
            job = self.store.get(job_id)
            if job.status in JobStatus.final():
                return
            if job.status == JobStatus.QUEUED:
                if not self.dispatcher.start(job_id):
                    time.sleep(poll_s)  # outside its window: wait for it to open
                continue
            for chunk in self.store.pending_chunks(job_id, self.settings.jobs.wave_chunks):
                self.run_chunk(self.store, job_id, chunk)
            self.dispatcher.close(job_id, job.generation)

    # --- reading: `tenant` None reads any tenant's job (the CLI, the beat); a tenant
    # reading another's job gets NotFound, as for a job that does not exist.
    def get(self, job_id: str, tenant: str | None = None) -> Job:
        return self.store.get(job_id, tenant)

    def progress(self, job: Job) -> Progress:
        return self.store.progress(job)

    def describe(self, job_id: str, tenant: str | None = None) -> dict[str, Any]:
        """The job as the API and `embedq jobs status` show it."""
        if tenant is not None:
            self.store.get(job_id, tenant)
        return self.dispatcher.describe(job_id)

    def list(self, limit: int = 50, status: str | None = None,
             tenant: str | None = None, after: str | None = None) -> list[dict[str, Any]]:
        """Jobs newest first, as `describe` shows them (the CLI's and GET /v1/jobs's
        page). A row this release cannot load (stored by an older one) is logged and left
        out; the others are listed."""
        if status is not None and status not in set(JobStatus):
            raise InvalidInput(f"status {status!r} is unknown: use one of "
                               f"{', '.join(JobStatus)}", "status")
        described = []
        for job_id in self.store.recent(limit, status, tenant, after):
            try:
                described.append(self.describe(job_id))
            except NotFound:
                continue  # deleted since the page was read
            except EmbedqError:
                raise
            except Exception as exc:
                log.warning("job %s cannot be read (%s: %s): left out of the list; cancel "
                            "it with `embedq jobs cancel %s`", job_id, type(exc).__name__,
                            exc, job_id)
        return described

    def results(self, job_id: str, offset: int = 0, limit: int = 100,
                tenant: str | None = None) -> Iterator[ResultRow]:
        if offset < 0 or limit < 1:
            raise InvalidInput("offset must be >= 0 and limit >= 1", "offset")
        self.store.get(job_id, tenant)
        return self.store.results(job_id, offset, limit)

    def cancel(self, job_id: str, tenant: str | None = None) -> bool:
        """Cancel what has not run; chunks already done keep their vectors. Needs only the
        job's owner, so even a row this release cannot load can be cancelled."""
        self.store.owner(job_id, tenant)
        return self.store.transition(job_id, JobStatus.active(), None,
                                     status=JobStatus.CANCELLED, finished_at=self.clock())

    def tick(self, now: datetime | None = None) -> dict[str, int]:
        return self.dispatcher.tick(now)

    def window_of(self, job: Job) -> Window | None:
        return job_window(job, self.settings)


class _Loader:
    """Streams records into items and chunk rows, one transaction per page."""

    def __init__(self, jobs: JobService, job_id: str, spec: Any, tenant: str,
                 room: int, *, checked: bool = False) -> None:
        self.jobs = jobs
        self.checked = checked  # the records are checked_record's already (a list in memory)
        self.tenant = tenant
        self.room = room  # inputs the tenant's queue takes (EMBEDQ_TENANT_MAX_QUEUED_INPUTS)
        self.job_id = job_id
        self.spec = spec
        self.items: list[ItemRow] = []
        self.chunks: list[dict[str, Any]] = []
        self.count = 0
        self.chunk_no = 0
        self.chunk_start = 0
        self.chunk_tokens = 0
        self.max_tokens = jobs.settings.jobs.chunk_tokens
        self.max_texts = jobs.settings.jobs.chunk_max_texts
        self.limit = jobs.settings.api.max_job_inputs

    def add(self, record: Record | str, n: int) -> None:
        if not self.checked or not isinstance(record, Record):
            record = checked_record(record, n, self.jobs.settings)
        if self.count >= self.limit:
            raise BadInputFile(
                f"a job holds at most {self.limit} inputs (EMBEDQ_MAX_JOB_INPUTS): split "
                "the file", record.line)
        if self.count >= self.room:
            cap = self.jobs.settings.tenants.max_queued_inputs
            raise queue_full(self.tenant, cap - self.room, self.count + 1, cap)
        try:
            fp = fingerprint(self.spec, record.text)
        except InvalidInput as exc:
            raise BadInputFile(str(exc), record.line) from None
        tokens = estimate_tokens(record.text)
        texts = self.count - self.chunk_start
        if texts and (texts >= self.max_texts or self.chunk_tokens + tokens > self.max_tokens):
            self._close_chunk()
        self.items.append(ItemRow(self.job_id, self.count, record.id, record.text, fp))
        self.count += 1
        self.chunk_tokens += tokens
        if len(self.items) >= PAGE_ITEMS:
            self._flush()

    def _close_chunk(self) -> None:
        self.chunks.append({
            "job_id": self.job_id, "chunk": self.chunk_no, "start": self.chunk_start,
            "stop": self.count, "tokens": self.chunk_tokens,
            "status": ChunkStatus.PENDING,
            "encoded": 0, "done": 0, "cached": 0, "coalesced": 0, "failed": 0,
        })
        self.chunk_no += 1
        self.chunk_start = self.count
        self.chunk_tokens = 0

    def _flush(self) -> None:
        self.jobs.store.add(self.job_id, self.items, self.chunks)
        self.items, self.chunks = [], []

    def seal(self, error: str | None = None) -> None:
        if self.count > self.chunk_start:
            self._close_chunk()
        self._flush()
        self.jobs.store.seal(self.job_id, self.count, self.chunk_no, error)


def queue_full(tenant: str, queued: int, inputs: int, cap: int) -> QueueLimitReached:
    return QueueLimitReached(
        f"tenant {tenant!r} has {queued} inputs in unfinished jobs, and {inputs} more would "
        f"pass its limit (EMBEDQ_TENANT_MAX_QUEUED_INPUTS={cap}): retry once some of its "
        "jobs finished (GET /v1/jobs shows them), cancel one no longer needed, or have the "
        "operator raise EMBEDQ_TENANT_MAX_QUEUED_INPUTS", retry_after_s=60)


def checked_record(record: Record | str, n: int, settings: Settings) -> Record:
    """The `n`th input as a Record whose text and id Postgres can store as sent and whose
    text is within EMBEDQ_MAX_INPUT_CHARS; BadInputFile naming its line and field
    otherwise (InputFileTooLarge, a 413, past the limit)."""
    if isinstance(record, str):
        record = Record(n + 1, None, record)
    if not isinstance(record.text, str) or not record.text:
        raise BadInputFile("the text is empty: give every input some text", record.line)
    try:
        check_input_chars(record.text, settings, "the text", "input")
    except InputTooLarge as exc:
        raise InputFileTooLarge(str(exc), record.line) from None
    for field, value in (("text", record.text), ("id", record.id)):
        if value is None:
            continue
        value = str(value)
        if "\x00" in value:
            # Postgres text columns cannot hold NUL; refusing beats a 500 or a silent edit.
            raise BadInputFile(f"the {field} contains a NUL character (\\0): remove it",
                               record.line)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise BadInputFile(
                f"the {field} contains a lone surrogate (\\ud800-\\udfff), which is not "
                "text and cannot be stored: send valid UTF-8 (pair the surrogate or "
                "remove it)", record.line) from None
    return record
