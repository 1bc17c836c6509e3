"""The OpenAI Batch API over jobs: a batch is one job whose items are its request lines'
inputs (a line with a list input is several items, each carrying the line's custom_id).

Status, from the job's: `validating` while the job's items load, `in_progress` while it
is queued (an off-peak window, EMBEDQ_BATCH_WINDOW, may hold it) or running, `completed`
once it is final (failed requests are in the error file), `failed` when no request could
run, `cancelled` after a cancel, `expired` when the 24 h completion window passed first
(the job is cancelled then; what ran is in the output file, the rest in the error file).
`finalizing` is the short step between a final job and its files.

A batch is finalized once, the first time it is read final: a compare-and-set on
`finalized_at` records its counts and creates its output and error file rows. Their
content is rendered from the job's items and the `embeddings` table whenever it is read,
so vectors are stored once; ids in it are derived from the batch, so every read gives the
same bytes. Request counts of a running batch are counted over the job's items per read.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from itertools import chain
from typing import Any

from sqlalchemy import case, delete, func, select, update

from embedq import wire
from embedq.errors import EmbedqError, MalformedRequest, NotFound
from embedq.jobs.files import ENDPOINT, FileStore, parse_requests, unix
from embedq.jobs.readers import Record
from embedq.jobs.service import JobService
from embedq.jobs.store import JobStore
from embedq.limits import check_json, plausible_id
from embedq.models import (
    DEFAULT_TENANT,
    Batch,
    Embedding,
    File,
    FilePurpose,
    Job,
    JobItem,
    JobStatus,
    Priority,
)

COMPLETION_WINDOW = "24h"
PAGE_ROWS = 2000
MAX_METADATA_KEYS = 16

# Counts the tokens of a request's texts, as /v1/embeddings reports them in `usage`.
TokenUsage = Callable[[list[str]], int]
# The spec's dimensions for a requested width (the API's rule: None for the native one).
Dimensions = Callable[[int | None], int | None]


@dataclass(frozen=True)
class _Line:
    custom_id: str
    texts: list[str]
    vectors: list[bytes | None]
    errors: list[str | None]


class BatchService:
    def __init__(self, jobs: JobService, files: FileStore) -> None:
        self.jobs = jobs
        self.files = files
        self.db = files.db
        self.settings = jobs.settings

    # --- creating
    def create(self, input_file_id: str, endpoint: str, completion_window: str,
               metadata: dict[str, str] | None, dimensions: Dimensions,
               tenant: str = DEFAULT_TENANT,
               admit: Callable[[int], None] | None = None) -> dict[str, Any]:
        """A batch of `tenant` over its uploaded file; the batch's job is `tenant`'s.

        Its texts are counted before anything is stored: past the room of the tenant's
        queue (EMBEDQ_TENANT_MAX_QUEUED_INPUTS) the batch is refused (QueueLimitReached),
        and `admit(texts)` may refuse it too (the API charges the key's texts a day)."""
        if endpoint != ENDPOINT:
            raise MalformedRequest(f"endpoint {endpoint!r} is not served here: batches run "
                                   f"{ENDPOINT} only", "endpoint")
        if completion_window != COMPLETION_WINDOW:
            raise MalformedRequest(f"completion_window {completion_window!r} is not "
                                   f"supported: send {COMPLETION_WINDOW!r}", "completion_window")
        _check_metadata(metadata)
        source = self.files.get(input_file_id, tenant)
        if source.purpose != FilePurpose.BATCH:
            raise MalformedRequest(f"file {input_file_id!r} has purpose {source.purpose!r}: "
                                   "upload request lines with purpose=batch", "input_file_id")
        content = self.files.content(input_file_id)
        texts = sum(len(request.texts) for request in parse_requests(content, self.settings))
        self.jobs.check_room(tenant, texts)
        if admit is not None:
            admit(texts)
        requests = parse_requests(content, self.settings)
        first = next(requests)
        batch_id = f"batch_{uuid.uuid4().hex}"
        count = 0

        def records() -> Iterator[Record]:
            nonlocal count
            for request in chain([first], requests):
                count += 1
                for text in request.texts:
                    yield Record(request.line, request.custom_id, text)

        saved: list[str] = []

        def on_saved(job_id: str) -> None:
            saved.append(job_id)
            now = self.jobs.clock()
            with self.db.session() as s:
                s.add(Batch(
                    id=batch_id, input_file_id=input_file_id, job_id=job_id, endpoint=endpoint,
                    completion_window=completion_window, meta=metadata, requests=0,
                    encoding_format=first.encoding_format, created_at=now,
                    expires_at=now + timedelta(hours=24), completed=0, failed=0,
                ))

        self.jobs.service.spec(first.model)  # UnknownModel before anything is stored
        job_id = self._submit_whole(records(), saved, model=first.model,
                                    dimensions=dimensions(first.dimensions),
                                    priority=Priority.BULK, window=self.settings.jobs.batch_window,
                                    source="batch", on_saved=on_saved, tenant=tenant)
        with self.db.session() as s:
            s.execute(update(Batch).where(Batch.id == batch_id).values(requests=count))
        self.jobs.start(job_id)
        return self.describe(batch_id)

    def _submit_whole(self, records: Iterator[Record], saved: list[str], **options: Any
                      ) -> str:
        """The job of every record, not started; refused (4xx) or not stored (5xx), no
        batch and no part of its job is left behind to run, to list or to count against
        the tenant's queue. (With the database gone the discard fails too: beat then
        fails the job that stopped loading, EMBEDQ_JOB_LOAD_TIMEOUT_S.)"""
        try:
            return self.jobs.submit(records, start=False, **options)
        except EmbedqError:
            for job_id in saved:
                with contextlib.suppress(EmbedqError), self.db.session() as s:
                    s.execute(delete(Batch).where(Batch.job_id == job_id))
                    JobStore.delete(s, job_id)
            raise

    # --- reading
    def get(self, batch_id: str, tenant: str | None = None) -> Batch:
        """The batch; NotFound when there is none or its job is not `tenant`'s (None: any)."""
        batch = None
        if plausible_id(batch_id):
            with self.db.session() as s:
                batch = s.get(Batch, batch_id)
                if batch is not None and tenant is not None and s.scalar(
                        select(Job.tenant).where(Job.id == batch.job_id)) != tenant:
                    batch = None
        if batch is None:
            raise NotFound(f"batch {batch_id!r} does not exist: GET /v1/batches lists them")
        return batch

    def describe(self, batch_id: str, tenant: str | None = None) -> dict[str, Any]:
        """The OpenAI Batch object; finalizes the batch when its job is final."""
        batch = self.get(batch_id, tenant)
        job = self.jobs.get(batch.job_id)
        now = self.jobs.clock()
        if batch.finalized_at is None and job.status in JobStatus.active() \
                and now >= batch.expires_at:
            self.jobs.cancel(job.id)
            self._mark(batch.id, expired_at=now)
            batch, job = self.get(batch_id), self.jobs.get(batch.job_id)
        if batch.finalized_at is None and job.status in JobStatus.final():
            self._finalize(batch, job)
            batch = self.get(batch_id)
        completed, failed = ((batch.completed, batch.failed) if batch.finalized_at
                             else self._counts(job.id))
        return {
            "id": batch.id, "object": "batch", "endpoint": batch.endpoint,
            "errors": _errors(job), "input_file_id": batch.input_file_id,
            "completion_window": batch.completion_window, "status": _status(batch, job),
            "output_file_id": batch.output_file_id, "error_file_id": batch.error_file_id,
            "created_at": unix(batch.created_at), "in_progress_at": unix(job.started_at),
            "expires_at": unix(batch.expires_at), "finalizing_at": unix(job.finished_at),
            "completed_at": unix(batch.finalized_at) if _status(batch, job) == "completed"
            else None,
            "failed_at": unix(batch.finalized_at) if _status(batch, job) == "failed" else None,
            "expired_at": unix(batch.expired_at), "cancelling_at": unix(batch.cancelled_at),
            "cancelled_at": unix(batch.finalized_at) if batch.cancelled_at else None,
            "request_counts": {"total": batch.requests, "completed": completed,
                               "failed": failed},
            "metadata": batch.meta,
        }

    def list(self, limit: int, after: str | None, tenant: str | None = None
             ) -> list[dict[str, Any]]:
        """Newest first; `after` is the last id of the previous page."""
        query = select(Batch.id).order_by(Batch.created_at.desc(), Batch.id.desc()).limit(limit)
        if tenant is not None:
            query = query.join(Job, Job.id == Batch.job_id).where(Job.tenant == tenant)
        if after:
            cursor = self.get(after, tenant)
            query = query.where((Batch.created_at < cursor.created_at) | (
                (Batch.created_at == cursor.created_at) & (Batch.id < cursor.id)))
        with self.db.session() as s:
            ids = list(s.scalars(query))
        return [self.describe(batch_id) for batch_id in ids]

    def cancel(self, batch_id: str, tenant: str | None = None) -> dict[str, Any]:
        """Cancel what has not run; requests already done stay in the output file."""
        batch = self.get(batch_id, tenant)
        if batch.finalized_at is None:
            self._mark(batch.id, cancelled_at=self.jobs.clock())
            self.jobs.cancel(batch.job_id)
        return self.describe(batch_id)

    # --- produced files
    def render(self, file: File, usage: TokenUsage) -> Iterator[bytes]:
        """The content of a batch's output or error file, one JSON line at a time."""
        if file.batch_id is None:
            raise NotFound(f"file {file.id!r} is not produced by a batch")
        batch = self.get(file.batch_id)
        job = self.jobs.get(batch.job_id)
        model = self.jobs.dispatcher.model_label(job)  # as the requests named it
        for line in self._lines(job.id):
            ok = all(v is not None for v in line.vectors)
            if ok == file.errors:
                continue
            req = hashlib.sha256(f"{batch.id}\0{line.custom_id}".encode()).hexdigest()
            out: dict[str, Any] = {"id": f"batch_req_{req[:32]}", "custom_id": line.custom_id}
            if ok:
                out["response"] = {"status_code": 200, "request_id": f"req_{req[32:]}",
                                   "body": _body(line, model, batch.encoding_format,
                                                 usage)}
                out["error"] = None
            else:
                out["response"] = None
                out["error"] = _line_error(line, batch)
            yield (json.dumps(out, separators=(",", ":")) + "\n").encode("utf-8")

    def file_bytes(self, file: File, usage: TokenUsage) -> int:
        """A file's size; a produced file's is measured by rendering it once."""
        if file.size is None:
            size = sum(len(chunk) for chunk in self.render(file, usage))
            self.files.set_bytes(file.id, size)
            return size
        return file.size

    # --- internals
    def _mark(self, batch_id: str, **values: Any) -> None:
        with self.db.session() as s:
            s.execute(update(Batch).where(Batch.id == batch_id,
                                          Batch.finalized_at.is_(None)).values(**values))

    def _finalize(self, batch: Batch, job: Job) -> None:
        completed, _ = self._counts(job.id)
        failed = batch.requests - completed
        output = self.files.produced(batch.id, errors=False, owner=job.tenant)
        error = self.files.produced(batch.id, errors=True, owner=job.tenant)
        with self.db.session() as s:
            won = s.execute(update(Batch).where(
                Batch.id == batch.id, Batch.finalized_at.is_(None)).values(
                finalized_at=self.jobs.clock(), completed=completed, failed=failed,
                output_file_id=output.id if completed else None,
                error_file_id=error.id if failed else None))
            if getattr(won, "rowcount", 0):
                s.add_all(([output] if completed else []) + ([error] if failed else []))

    def _counts(self, job_id: str) -> tuple[int, int]:
        """(completed, failed) request lines: every input has a vector / some has an error."""
        per_line = (
            select(
                func.min(case((Embedding.fingerprint.is_(None), 0), else_=1)).label("done"),
                func.max(case((JobItem.error.is_(None), 0), else_=1)).label("bad"),
            )
            .select_from(JobItem)
            .outerjoin(Embedding, Embedding.fingerprint == JobItem.fingerprint)
            .where(JobItem.job_id == job_id)
            .group_by(JobItem.external_id)
            .subquery()
        )
        with self.db.session() as s:
            completed, failed = s.execute(select(
                func.count().filter(per_line.c.done == 1),
                func.count().filter(per_line.c.bad == 1),
            )).one()
        return int(completed or 0), int(failed or 0)

    def _lines(self, job_id: str) -> Iterator[_Line]:
        """The job's items grouped back into request lines, in input order."""
        current: _Line | None = None
        index = 0
        while True:
            with self.db.session() as s:
                rows = list(s.execute(
                    select(JobItem.index, JobItem.external_id, JobItem.text, Embedding.vector,
                           JobItem.error)
                    .outerjoin(Embedding, Embedding.fingerprint == JobItem.fingerprint)
                    .where(JobItem.job_id == job_id, JobItem.index >= index)
                    .order_by(JobItem.index).limit(PAGE_ROWS)
                ))
            for _, custom_id, text, vector, error in rows:
                if current is None or current.custom_id != custom_id:
                    if current is not None:
                        yield current
                    current = _Line(str(custom_id), [], [], [])
                current.texts.append(text)
                current.vectors.append(bytes(vector) if vector is not None else None)
                current.errors.append(error)
            if len(rows) < PAGE_ROWS:
                break
            index = rows[-1][0] + 1
        if current is not None:
            yield current


def _status(batch: Batch, job: Job) -> str:
    if batch.finalized_at is None:
        if job.status in JobStatus.final():
            return "finalizing"
        if batch.cancelled_at is not None:
            return "cancelling"
        return "in_progress" if job.loaded else "validating"
    if batch.expired_at is not None:
        return "expired"
    if batch.cancelled_at is not None or job.status == JobStatus.CANCELLED:
        return "cancelled"
    if batch.completed == 0 and job.status == JobStatus.FAILED:
        return "failed"
    return "completed"


def _errors(job: Job) -> dict[str, Any] | None:
    if job.status != JobStatus.FAILED or not job.error:
        return None
    return {"object": "list", "data": [{"code": "job_failed", "message": job.error,
                                        "param": None, "line": None}]}


def _body(line: _Line, model: str, encoding_format: str, usage: TokenUsage) -> dict[str, Any]:
    data = []
    for i, vector in enumerate(line.vectors):
        assert vector is not None
        embedding: Any = (base64.b64encode(vector).decode("ascii")
                          if encoding_format == "base64"
                          else wire.floats(vector))
        data.append({"object": "embedding", "index": i, "embedding": embedding})
    tokens = usage(line.texts)
    return {"object": "list", "data": data, "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def _line_error(line: _Line, batch: Batch) -> dict[str, str]:
    for i, error in enumerate(line.errors):
        if error is not None:
            return {"code": "embedding_failed", "message": f"input[{i}]: {error}"}
    if batch.expired_at is not None:
        return {"code": "batch_expired",
                "message": "the batch expired before this request ran: submit it again"}
    if batch.cancelled_at is not None:
        return {"code": "batch_cancelled",
                "message": "the batch was cancelled before this request ran: submit it again"}
    return {"code": "not_embedded",
            "message": "this request has no vector: submit it again in a new batch"}


def _check_metadata(metadata: dict[str, str] | None) -> None:
    if metadata is None:
        return
    if len(metadata) > MAX_METADATA_KEYS or any(
            not isinstance(v, str) or len(k) > 64 or len(v) > 512 for k, v in metadata.items()):
        raise MalformedRequest(f"metadata holds at most {MAX_METADATA_KEYS} string pairs, "
                               "keys up to 64 and values up to 512 characters", "metadata")
    check_json(metadata, "metadata")  # no NUL, no lone surrogate: every reader reads it

