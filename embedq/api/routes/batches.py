"""The OpenAI Batch API: /v1/files (upload request lines, read, list, delete) and
/v1/batches (create over an uploaded file, poll, cancel, list), for /v1/embeddings.

A batch is a bulk job (embedq.jobs.batches): it runs in EMBEDQ_BATCH_WINDOW when that is
set, else at once. An output file's content is rendered from the job when read. Handlers
are plain functions: FastAPI runs them on its thread pool, off the event loop.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Query, Request, UploadFile
from fastapi import File as FormFile
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict
from starlette.concurrency import run_in_threadpool

from embedq.api.auth import JOBS, JobsCaller, charge_texts
from embedq.api.routes.embeddings import resolve_dimensions
from embedq.api.routes.jobs import job_service
from embedq.api.state import get_state
from embedq.errors import InputTooLarge
from embedq.jobs.batches import COMPLETION_WINDOW, BatchService, TokenUsage
from embedq.jobs.files import ENDPOINT, FileStore, unix
from embedq.jobs.files import BatchRequest as LineRequest
from embedq.jobs.service import JobService
from embedq.models import File

router = APIRouter(tags=["batches"], dependencies=[Depends(JOBS)])

MAX_PAGE = 100


def batch_service(request: Request, jobs: Annotated[JobService, Depends(job_service)]
                  ) -> BatchService:
    """One BatchService per app, over the app's JobService."""
    state = request.app.state
    batches: BatchService | None = getattr(state, "batches", None)
    if batches is None:
        batches = BatchService(jobs, FileStore(jobs.service.db, jobs.settings))
        state.batches = batches
    return batches


Batches = Annotated[BatchService, Depends(batch_service)]


def token_usage(request: Request) -> TokenUsage:
    """Tokens of a request's texts as /v1/embeddings counts them (clipped to the window)."""
    tokens = get_state(request).tokens

    def usage(texts: list[str]) -> int:
        window = tokens.window
        return sum(min(n, window) if window is not None else n
                   for n in tokens.raw_tokens(texts))

    return usage


Usage = Annotated[TokenUsage, Depends(token_usage)]


def _file(row: File, batches: BatchService, usage: TokenUsage) -> dict[str, Any]:
    return {"id": row.id, "object": "file", "bytes": batches.file_bytes(row, usage),
            "created_at": unix(row.created_at), "filename": row.filename,
            "purpose": row.purpose, "status": "processed", "status_details": None,
            "expires_at": None}


def _page(data: list[dict[str, Any]], limit: int) -> dict[str, Any]:
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": len(data) == limit}


# --- files
@router.post("/v1/files", summary="Upload a JSONL file of /v1/embeddings requests")
async def upload_file(
    batches: Batches, usage: Usage, caller: JobsCaller, request: Request,
    file: Annotated[UploadFile, FormFile(description="JSONL, one request a line")],
    purpose: Annotated[str, Form(description="batch")],
) -> dict[str, Any]:
    limit = batches.settings.api.max_file_bytes
    content = await file.read(limit + 1)
    if len(content) > limit:
        raise InputTooLarge(f"the file is over the limit of {limit} bytes "
                            "(EMBEDQ_MAX_FILE_BYTES): split it into several files", "file")
    state = get_state(request)

    def encoding(line: LineRequest) -> None:
        """The checks POST /v1/batches makes of the file's model and width, made now."""
        batches.jobs.service.spec(line.model)
        resolve_dimensions(line.dimensions, state.tokens.dimension, state.settings.model.dimensions)

    row = await run_in_threadpool(batches.files.create, file.filename or "", purpose, content,
                                  caller.tenant, encoding)
    return _file(row, batches, usage)


@router.get("/v1/files")
def list_files(
    batches: Batches, usage: Usage, caller: JobsCaller,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 20,
    after: str | None = None, purpose: str | None = None,
) -> dict[str, Any]:
    rows = batches.files.list(limit, after, purpose, caller.tenant)
    return _page([_file(row, batches, usage) for row in rows], limit)


@router.get("/v1/files/{file_id}")
def get_file(file_id: str, batches: Batches, usage: Usage, caller: JobsCaller
             ) -> dict[str, Any]:
    return _file(batches.files.get(file_id, caller.tenant), batches, usage)


@router.get("/v1/files/{file_id}/content", response_model=None)
def file_content(file_id: str, batches: Batches, usage: Usage, caller: JobsCaller
                 ) -> StreamingResponse:
    row = batches.files.get(file_id, caller.tenant)
    if row.batch_id is None:
        content = batches.files.content(file_id)
        return StreamingResponse(iter([content]), media_type="application/jsonl")
    return StreamingResponse(batches.render(row, usage), media_type="application/jsonl")


@router.delete("/v1/files/{file_id}")
def delete_file(file_id: str, batches: Batches, caller: JobsCaller) -> dict[str, Any]:
    batches.files.delete(file_id, caller.tenant)
    return {"id": file_id, "object": "file", "deleted": True}


# --- batches
class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_file_id: str
    endpoint: str = ENDPOINT
    completion_window: str = COMPLETION_WINDOW
    metadata: dict[str, str] | None = None


@router.post("/v1/batches", summary="Run an uploaded file's requests as one bulk job")
def create_batch(body: BatchRequest, batches: Batches, caller: JobsCaller, request: Request
                 ) -> dict[str, Any]:
    state = get_state(request)

    def dimensions(requested: int | None) -> int | None:
        return resolve_dimensions(requested, state.tokens.dimension,
                                  state.settings.model.dimensions)

    # The file's texts: the audit line's inputs and the key's texts a day.
    return batches.create(body.input_file_id, body.endpoint, body.completion_window,
                          body.metadata, dimensions, caller.tenant,
                          admit=lambda texts: charge_texts(request, texts))


@router.get("/v1/batches")
def list_batches(
    batches: Batches, caller: JobsCaller,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 20,
    after: str | None = None,
) -> dict[str, Any]:
    return _page(batches.list(limit, after, caller.tenant), limit)


@router.get("/v1/batches/{batch_id}")
def get_batch(batch_id: str, batches: Batches, caller: JobsCaller) -> dict[str, Any]:
    return batches.describe(batch_id, caller.tenant)


@router.post("/v1/batches/{batch_id}/cancel")
def cancel_batch(batch_id: str, batches: Batches, caller: JobsCaller) -> dict[str, Any]:
    return batches.cancel(batch_id, caller.tenant)
