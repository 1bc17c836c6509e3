"""/v1/jobs: submit a job (202), poll it, page through its results, cancel it.

Jobs live in the database: a 202 is answered only after the job, its items and its chunks
are committed, so nothing accepted is lost to an API restart or a Redis flush. A database
outage is answered 503 with Retry-After (DatabaseUnavailable through the error table).
Handlers are plain functions: FastAPI runs them on its thread pool, off the event loop.

A job's `status` is queued, running, succeeded, succeeded_with_errors (finished, with
`progress.failed` items that have an error instead of a vector), failed (every item
failed, or nothing to do) or cancelled.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from embedq.errors import InputTooLarge, InvalidInput
from embedq.jobs.readers import Record
from embedq.jobs.service import JobService
from embedq.jobs.windows import MAX_NOT_BEFORE, check_not_before
from embedq.models import Priority

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

MAX_RESULTS_PAGE = 1000


class JobInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    text: str


class JobRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: list[str | JobInput] = Field(min_length=1)
    model: str | None = None
    priority: Priority = Priority.ONLINE
    not_before: datetime | None = Field(
        default=None,
        description=f"start no earlier than this; at most {MAX_NOT_BEFORE.days} days ahead",
    )
    window: str | None = Field(default=None, description="off-peak window, HH:MM-HH:MM")
    timezone: str | None = None

    @field_validator("not_before")
    @classmethod
    def _not_too_far(cls, value: datetime | None) -> datetime | None:
        try:
            check_not_before(value, datetime.now(UTC))
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
def submit_job(body: JobRequest, jobs: Jobs, request: Request) -> JSONResponse:
    limit = jobs.settings.max_job_inputs
    if len(body.input) > limit:
        raise InputTooLarge(
            f"a job holds at most {limit} inputs (EMBEDQ_MAX_JOB_INPUTS): split it", "input"
        )
    records = [
        Record(n + 1, None, item) if isinstance(item, str) else Record(n + 1, item.id, item.text)
        for n, item in enumerate(body.input)
    ]
    try:
        job_id = jobs.submit(
            records, model=body.model, priority=body.priority, window=body.window,
            timezone=body.timezone, not_before=body.not_before, source="api",
        )
    except InvalidInput as exc:
        # BadInputFile counts lines from 1; for a request body, name the input index.
        line = getattr(exc, "line", None)
        if line is not None:
            raise InvalidInput(f"input {line - 1}: {str(exc).split(': ', 1)[-1]}",
                               "input") from exc
        raise
    status_url = str(request.url_for("get_job", job_id=job_id))
    state = jobs.describe(job_id)
    return JSONResponse(
        {"id": job_id, "object": "job", "status": state["status"], "status_url": status_url},
        status_code=202, headers={"Location": status_url},
    )


@router.get("/{job_id}", name="get_job")
def get_job(job_id: str, jobs: Jobs) -> dict[str, Any]:
    return jobs.describe(job_id)


@router.get("/{job_id}/results")
def job_results(
    job_id: str,
    jobs: Jobs,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_RESULTS_PAGE)] = 100,
) -> dict[str, Any]:
    """Vectors in input order from `offset`; an item not done yet has neither vector nor
    error; a failed item has its error."""
    job = jobs.get(job_id)
    data = []
    for row in jobs.results(job_id, offset, limit):
        vector = None if row.vector is None else np.frombuffer(row.vector, "<f4").tolist()
        data.append({"object": "embedding", "index": row.index, "id": row.id,
                     "embedding": vector, "error": row.error})
    return {
        "object": "list", "job_id": job_id, "status": job.status, "model": job.model,
        "offset": offset, "limit": limit, "total": job.total,
        "has_more": offset + len(data) < job.total, "data": data,
    }


@router.delete("/{job_id}")
def cancel_job(job_id: str, jobs: Jobs) -> dict[str, Any]:
    """Cancel what has not run; chunks already done keep their vectors."""
    cancelled = jobs.cancel(job_id)
    state = jobs.describe(job_id)
    state["cancelled"] = cancelled
    return state
