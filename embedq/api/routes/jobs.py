"""/v1/jobs: submit a job (202), list the tenant's jobs, poll one, page through its
results, cancel it.

Jobs live in the database: a 202 is answered only after the job, its items and its chunks
are committed, so nothing accepted is lost to an API restart or a Redis flush. A database
outage is answered 503 with Retry-After (DatabaseUnavailable through the error table).
Handlers are plain functions: FastAPI runs them on its thread pool, off the event loop.

`GET /v1/jobs/{id}/events` streams the same state as Server-Sent Events (see `job_events`).

A job's `status` is queued, running, succeeded, succeeded_with_errors (finished, with
`progress.failed` items that have an error instead of a vector), failed (every item
failed, or nothing to do) or cancelled.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from embedq import wire
from embedq.api.auth import JOBS, JobsCaller, charge_texts
from embedq.errors import InputTooLarge, InvalidInput, Unavailable
from embedq.jobs.callbacks import MAX_URL_CHARS
from embedq.jobs.readers import Record
from embedq.jobs.service import JobService
from embedq.jobs.windows import MAX_NOT_BEFORE, check_not_before
from embedq.limits import check_moment
from embedq.models import JobStatus, Priority

log = logging.getLogger("embedq.api.jobs")

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], dependencies=[Depends(JOBS)])

MAX_RESULTS_PAGE = 1000
MAX_LIST_PAGE = 100
EVENTS_POLL_S = 1.0  # one database read per open stream per second; also the event spacing
EVENTS_KEEPALIVE_S = 15.0  # a comment line while nothing changes, so proxies keep the stream
_FINAL = "-final"  # the end of a final state's event id


class JobInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    text: str


class JobRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: list[str | JobInput] = Field(min_length=1)
    model: str | None = None
    precision: str | None = Field(
        default=None, description="the tier (fp32, int8, fp16: one of EMBEDQ_TIERS); default "
        "EMBEDQ_JOB_PRECISION, else the deployment's default tier")
    priority: Priority = Priority.ONLINE
    not_before: datetime | None = Field(
        default=None,
        description=f"start no earlier than this; at most {MAX_NOT_BEFORE.days} days ahead",
    )
    window: str | None = Field(default=None, description="off-peak window, HH:MM-HH:MM")
    timezone: str | None = None
    callback_url: str | None = Field(
        default=None, max_length=MAX_URL_CHARS,
        description="POST the final state here, signed (docs/jobs.md, Callbacks)",
    )

    @field_validator("not_before")
    @classmethod
    def _storable(cls, value: datetime | None) -> datetime | None:
        try:
            check_not_before(value, datetime.now(UTC))
            value = check_moment(value, "not_before")
        except InvalidInput as exc:
            raise ValueError(str(exc)) from None
        return value


def job_service(request: Request) -> JobService:
    """One JobService per app, from the process's deployment."""
    state = request.app.state
    jobs: JobService | None = getattr(state, "jobs", None)
    if jobs is None:
        jobs = state.deployment.jobs()
        state.jobs = jobs
    return jobs


Jobs = Annotated[JobService, Depends(job_service)]


@router.post("", status_code=202)
def submit_job(body: JobRequest, jobs: Jobs, caller: JobsCaller, request: Request
               ) -> JSONResponse:
    request.state.inputs = len(body.input)  # for the audit line (auth.py)
    limit = jobs.settings.api.max_job_inputs
    if len(body.input) > limit:
        raise InputTooLarge(
            f"a job holds at most {limit} inputs (EMBEDQ_MAX_JOB_INPUTS): split it", "input"
        )
    records = [
        Record(n + 1, None, item) if isinstance(item, str) else Record(n + 1, item.id, item.text)
        for n, item in enumerate(body.input)
    ]
    # The tenant's queue before the key's texts a day, so a job refused for a full queue
    # does not use up the day.
    jobs.check_room(caller.tenant, len(records))
    charge_texts(request, len(records))
    try:
        job_id = jobs.submit(
            records, model=body.model, precision=body.precision, priority=body.priority,
            window=body.window,
            timezone=body.timezone, not_before=body.not_before, source="api",
            callback_url=body.callback_url, tenant=caller.tenant,
        )
    except InvalidInput as exc:
        # BadInputFile counts lines from 1; for a request body, name the input index.
        line = getattr(exc, "line", None)
        if line is not None:
            kind = InputTooLarge if isinstance(exc, InputTooLarge) else InvalidInput
            raise kind(f"input {line - 1}: {str(exc).split(': ', 1)[-1]}", "input") from exc
        raise
    status_url = str(request.url_for("get_job", job_id=job_id))
    state = jobs.describe(job_id)
    return JSONResponse(
        {"id": job_id, "object": "job", "status": state["status"], "status_url": status_url},
        status_code=202, headers={"Location": status_url},
    )


@router.get("", summary="The caller's jobs, newest first, a page at a time")
def list_jobs(
    jobs: Jobs, caller: JobsCaller,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_PAGE)] = 20,
    after: Annotated[str | None, Query(description="the last id of the previous page")] = None,
    status: Annotated[JobStatus | None, Query(description="only jobs in this status")] = None,
) -> dict[str, Any]:
    """The tenant's jobs as `GET /v1/jobs/{id}` shows each; `has_more` says whether a next
    page (`after` = this page's `last_id`) holds more."""
    rows = jobs.list(limit + 1, status, caller.tenant, after)
    data = rows[:limit]
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": len(rows) > limit}


@router.get("/{job_id}", name="get_job")
def get_job(job_id: str, jobs: Jobs, caller: JobsCaller) -> dict[str, Any]:
    return jobs.describe(job_id, caller.tenant)


@router.get("/{job_id}/events", response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}},
                             "description": "Server-Sent Events, one `state` event a change"},
                       204: {"description": "Last-Event-ID names a final state the client "
                                            "already has: nothing more will come"}})
async def job_events(
    job_id: str, jobs: Jobs, caller: JobsCaller, request: Request,
    last_event_id: Annotated[str | None, Header(max_length=64)] = None,
) -> Response:
    """The job's state (as `GET /v1/jobs/{id}`) as Server-Sent Events: one `state` event
    now and one each time it changes, at most one a second; the final state is the last
    event, then the stream ends. An event's `id` is a digest of its state, ending in
    `-final` for a final state: a client that reconnects with `Last-Event-ID` is not sent
    the state it already has again, and one that has a final state gets 204 (the job's
    callback delivery may have changed the state since: GET /v1/jobs/{id} shows it).
    Every event has JSON data: `retry:` rides on the first one, and keepalives are
    comment lines, never an event of their own.

    Each open stream reads the database once a second, in the thread pool, and holds no
    connection or thread in between (the hot store's pub/sub would save the reads, but
    workers publish nothing there, and the database is where progress is counted)."""
    # An unknown id, or another tenant's, answers 404; the job's owner never changes,
    # so the stream's later reads need not check again.
    first = await run_in_threadpool(jobs.describe, job_id, caller.tenant)
    if first["status"] in JobStatus.final() and (last_event_id or "").endswith(_FINAL):
        return Response(status_code=204)  # has the final state: EventSource stops here
    return StreamingResponse(
        _events(request, jobs, job_id, first, last_event_id), media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _events(request: Request, jobs: JobService, job_id: str, state: dict[str, Any],
                  sent_id: str | None) -> AsyncIterator[str]:
    loop = asyncio.get_running_loop()
    quiet_since = loop.time()
    why = "the client disconnected"  # also when the server cancels this generator
    # A field block without data is an event with empty data to some clients (httpx-sse,
    # once an id was sent): `retry:` goes with the first event, a keepalive is a comment
    # line with no blank line after it.
    retry = f"retry: {int(EVENTS_POLL_S * 1000)}\n"
    try:
        while True:
            event_id = _event_id(state)
            final = state["status"] in JobStatus.final()
            if event_id != sent_id:
                yield f"{retry}id: {event_id}\nevent: state\ndata: {json.dumps(state)}\n\n"
                sent_id, quiet_since, retry = event_id, loop.time(), ""
            elif loop.time() - quiet_since >= EVENTS_KEEPALIVE_S:
                yield ": keepalive\n"
                quiet_since = loop.time()
            if final:
                why = "the final state was sent"
                return
            await asyncio.sleep(EVENTS_POLL_S)
            if await request.is_disconnected():
                return
            try:
                state = await run_in_threadpool(jobs.describe, job_id)
            except Unavailable as exc:
                log.warning("events of job %s: %s; trying again", job_id, exc)
    finally:
        log.info("events of job %s: stream closed, %s", job_id, why)


def _event_id(state: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()[:16]
    return digest + _FINAL if state["status"] in JobStatus.final() else digest


@router.get("/{job_id}/results")
def job_results(
    job_id: str,
    jobs: Jobs,
    caller: JobsCaller,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_RESULTS_PAGE)] = 100,
) -> dict[str, Any]:
    """Vectors in input order from `offset`; an item not done yet has neither vector nor
    error; a failed item has its error."""
    job = jobs.get(job_id, caller.tenant)
    data = []
    for row in jobs.results(job_id, offset, limit, caller.tenant):
        vector = None if row.vector is None else wire.floats(row.vector)
        data.append({"object": "embedding", "index": row.index, "id": row.id,
                     "embedding": vector, "error": row.error})
    return {
        "object": "list", "job_id": job_id, "status": job.status,
        "model": jobs.dispatcher.model_label(job),
        "offset": offset, "limit": limit, "total": job.total,
        "has_more": offset + len(data) < job.total, "data": data,
    }


@router.delete("/{job_id}")
def cancel_job(job_id: str, jobs: Jobs, caller: JobsCaller) -> dict[str, Any]:
    """Cancel what has not run; chunks already done keep their vectors."""
    cancelled = jobs.cancel(job_id, caller.tenant)
    state = jobs.describe(job_id)
    state["cancelled"] = cancelled
    return state
