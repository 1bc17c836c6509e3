"""Files of the OpenAI Batch API: upload (checked line by line), read, list, delete.

An uploaded batch file is JSONL, one request a line:

    {"custom_id": "a", "method": "POST", "url": "/v1/embeddings",
     "body": {"input": "text" | ["text", ...], "model": ..., "dimensions": ...,
              "encoding_format": "float" | "base64"}}

It is checked in full before it is stored, so a batch never starts on a file that fails
half-way: the first bad line is refused by number (MalformedRequest, 400; InputTooLarge,
413, past a limit of embedq.limits, naming its setting; InvalidInput, 422, for text the
job's rows could not store: a NUL, a lone surrogate). Every line of
one file shares one model, one `dimensions` and one `encoding_format`: a batch is one job,
and a job has one encoding. The file's bytes live in Postgres, up to
EMBEDQ_MAX_FILE_BYTES.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select

from embedq.config import Settings
from embedq.errors import InputTooLarge, InvalidInput, MalformedRequest, NotFound, UnknownModel
from embedq.limits import (
    MAX_BODY_BYTES,
    MAX_JOB_INPUTS,
    check_dimensions,
    check_text,
    check_texts,
    over,
    plausible_id,
)
from embedq.models import DEFAULT_TENANT, Database, File, FilePurpose

ENDPOINT = "/v1/embeddings"
ENCODING_FORMATS = ("float", "base64")
MAX_CUSTOM_ID_CHARS = 512
MAX_LIST = 100


@dataclass(frozen=True)
class BatchRequest:
    """One checked request line."""

    line: int  # 1-based
    custom_id: str
    texts: list[str]
    model: str | None
    dimensions: int | None
    encoding_format: str


def parse_requests(content: bytes, settings: Settings) -> Iterator[BatchRequest]:
    """The request lines of a batch file, in order; MalformedRequest names the first bad
    line, InputTooLarge the line past EMBEDQ_MAX_JOB_INPUTS."""
    seen: set[str] = set()
    inputs = 0
    first: BatchRequest | None = None
    for n, raw in enumerate(content.splitlines(), start=1):
        if not raw.strip():
            continue
        if len(raw) > settings.api.max_body_bytes:
            raise _line(n, over(MAX_BODY_BYTES, settings, len(raw), "the line",
                                "a line is one request: split its inputs over several "
                                "lines", "file"))
        request = _request(raw, n, settings)
        if request.custom_id in seen:
            raise _bad(n, f"custom_id {request.custom_id!r} is used by an earlier line: "
                          "give every line its own custom_id")
        seen.add(request.custom_id)
        inputs += len(request.texts)
        if inputs > settings.api.max_job_inputs:
            raise _line(n, over(MAX_JOB_INPUTS, settings, inputs, "the file so far",
                                "a batch is one job: split the file into several", "file"))
        if first is None:
            first = request
        else:
            _same_encoding(first, request)
        yield request
    if first is None:
        raise MalformedRequest("the file holds no request lines: send one JSON request a line",
                               "file")


def _request(raw: bytes, n: int, settings: Settings) -> BatchRequest:
    try:
        row = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise _bad(n, "not valid UTF-8: re-encode the file as UTF-8") from None
    except (ValueError, RecursionError) as exc:
        raise _bad(n, f"not a JSON object ({exc}): one JSON request a line") from None
    if not isinstance(row, dict):
        raise _bad(n, "not a JSON object: one JSON request a line")
    custom_id = row.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id or len(custom_id) > MAX_CUSTOM_ID_CHARS:
        raise _bad(n, f"custom_id must be a string of 1 to {MAX_CUSTOM_ID_CHARS} characters")
    try:
        check_text(custom_id, "custom_id")
    except InvalidInput as exc:
        raise _line(n, exc) from None
    if row.get("method") != "POST":
        raise _bad(n, f"method is {row.get('method')!r}: send \"method\": \"POST\"")
    if row.get("url") != ENDPOINT:
        raise _bad(n, f"url is {row.get('url')!r}: this server batches {ENDPOINT} only")
    body = row.get("body")
    if not isinstance(body, dict):
        raise _bad(n, 'body must be a JSON object such as {"input": "text", "model": "..."}')
    return BatchRequest(n, custom_id, _texts(body.get("input"), n, settings),
                        _model(body.get("model"), n), _dimensions(body.get("dimensions"), n),
                        _format(body.get("encoding_format"), n))


def _texts(raw: object, n: int, settings: Settings) -> list[str]:
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list) or not texts:
        raise _bad(n, "body.input must be a string or a non-empty list of strings "
                      "(token arrays are not supported)")
    try:
        # The checks of POST /v1/embeddings (the table every way in shares), and what the
        # job's rows can store: the whole file is checked before a batch can start on it.
        for text in check_texts(texts, settings, "body.input"):
            check_text(text, "body.input")
    except InvalidInput as exc:
        raise _line(n, exc) from None
    return texts


def _model(raw: object, n: int) -> str | None:
    if raw is not None and not isinstance(raw, str):
        raise _bad(n, "body.model must be a string naming a served model (GET /v1/models)")
    return raw


def _dimensions(raw: object, n: int) -> int | None:
    try:
        return check_dimensions(raw, "body.dimensions")
    except InvalidInput as exc:
        raise _bad(n, str(exc)) from None


def _format(raw: object, n: int) -> str:
    fmt = "float" if raw is None else raw
    if fmt not in ENCODING_FORMATS:
        raise _bad(n, f"body.encoding_format={raw!r} is not supported: use float or base64")
    return str(fmt)


def _same_encoding(first: BatchRequest, request: BatchRequest) -> None:
    for name in ("model", "dimensions", "encoding_format"):
        if getattr(request, name) != getattr(first, name):
            raise _bad(request.line,
                       f"body.{name} is {getattr(request, name)!r} but line {first.line} has "
                       f"{getattr(first, name)!r}: one batch runs one encoding, so put lines "
                       f"with another {name} in a file of their own")


def _bad(n: int, message: str) -> MalformedRequest:
    return MalformedRequest(f"line {n}: {message}", "file")


def _line(n: int, exc: InvalidInput) -> InvalidInput:
    """`exc` for line `n`, of its kind: 413 past a limit, 404 for a model not served,
    else 422 (a value that cannot be stored or encoded)."""
    kind = next(k for k in (InputTooLarge, UnknownModel, InvalidInput) if isinstance(exc, k))
    return kind(f"line {n}: {exc}", "file")


class FileStore:
    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings

    def create(self, filename: str, purpose: str, content: bytes,
               owner: str = DEFAULT_TENANT,
               encoding: Callable[[BatchRequest], object] | None = None) -> File:
        """Check an uploaded file and store it as `owner`'s; the File row, without its
        content. `encoding(first line)` checks the file's model and dimensions against
        the served model (a batch shares one encoding, `_same_encoding`), so a file
        accepted here makes a batch that starts."""
        if purpose != FilePurpose.BATCH:
            raise MalformedRequest(f"purpose {purpose!r} is not supported: upload request "
                                   "lines with purpose=batch", "purpose")
        if len(content) > self.settings.api.max_file_bytes:
            raise InputTooLarge(
                f"the file has {len(content)} bytes, over the limit of "
                f"{self.settings.api.max_file_bytes} (EMBEDQ_MAX_FILE_BYTES): split it", "file")
        check_text(filename, "filename")  # a multipart header may carry a NUL
        checked = encoding is None
        for request in parse_requests(content, self.settings):
            if not checked and encoding is not None:
                checked = True
                try:
                    encoding(request)
                except InvalidInput as exc:
                    raise _line(request.line, exc) from None
        row = File(id=new_file_id(), purpose=purpose, filename=(filename or "batch.jsonl")[:255],
                   size=len(content), content=content, errors=False, owner=owner)
        with self.db.session() as s:
            s.add(row)
        return self.get(row.id)

    def produced(self, batch_id: str, errors: bool, owner: str) -> File:
        """A new row for a batch's output (or error) file; its content is rendered when read."""
        name = f"{batch_id}_{'error' if errors else 'output'}.jsonl"
        return File(id=new_file_id(), purpose=FilePurpose.BATCH_OUTPUT, filename=name,
                    size=None, content=None, batch_id=batch_id, errors=errors, owner=owner)

    def get(self, file_id: str, tenant: str | None = None) -> File:
        """The file; NotFound when there is none or it is not `tenant`'s (None: any)."""
        row = None
        if plausible_id(file_id):
            with self.db.session() as s:
                row = s.get(File, file_id)
        if row is None or (tenant is not None and (row.owner or DEFAULT_TENANT) != tenant):
            raise NotFound(f"file {file_id!r} does not exist: GET /v1/files lists the files")
        return row

    def content(self, file_id: str, tenant: str | None = None) -> bytes:
        """The bytes of an uploaded file (a produced file has none: render its batch)."""
        if tenant is not None:
            self.get(file_id, tenant)
        with self.db.session() as s:
            content = s.scalar(select(File.content).where(File.id == file_id))
        if content is None:
            self.get(file_id)  # NotFound when there is no such file
            raise MalformedRequest(f"file {file_id!r} is produced by a batch: read it "
                                   "with GET /v1/files/{id}/content", "file_id")
        return bytes(content)

    def set_bytes(self, file_id: str, size: int) -> None:
        with self.db.session() as s:
            row = s.get(File, file_id)
            if row is not None:
                row.size = size

    def delete(self, file_id: str, tenant: str | None = None) -> None:
        """Delete a file (`tenant`'s, when given). A batch already created from it keeps
        running: its job holds the texts."""
        query = delete(File).where(File.id == file_id)
        if tenant is not None:
            query = query.where(File.owner == tenant)
        with self.db.session() as s:
            deleted = s.execute(query)
        if not getattr(deleted, "rowcount", 0):
            raise NotFound(f"file {file_id!r} does not exist: GET /v1/files lists the files")

    def list(self, limit: int, after: str | None, purpose: str | None,
             tenant: str | None = None) -> list[File]:
        """Newest first; `after` is the last id of the previous page."""
        query = select(File).order_by(File.created_at.desc(), File.id.desc()).limit(limit)
        if tenant is not None:
            query = query.where(File.owner == tenant)
        if purpose:
            if purpose not in {p.value for p in FilePurpose}:
                raise InvalidInput(f"purpose {purpose!r} is unknown: use "
                                   f"{', '.join(p.value for p in FilePurpose)}", "purpose")
            query = query.where(File.purpose == purpose)
        if after:
            cursor = self.get(after, tenant)
            query = query.where((File.created_at < cursor.created_at) | (
                (File.created_at == cursor.created_at) & (File.id < cursor.id)))
        with self.db.session() as s:
            return list(s.scalars(query))


def new_file_id() -> str:
    return f"file-{uuid.uuid4().hex}"


def unix(moment: datetime | None) -> int | None:
    return int(moment.timestamp()) if moment is not None else None


