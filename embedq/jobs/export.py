"""Export a job's vectors in input order: Parquet, NPY (+ an ids sidecar) or JSONL.

Streaming: rows are read `PAGE_ROWS` at a time and written as they come, so exporting a
million vectors costs one page of memory. A failed item keeps its place: a null embedding
(Parquet, JSONL) or a NaN row (NPY), with its error in the `error` column / sidecar.

Each file says where its vectors came from (`provenance`: the model, its revision, the
width, whether normalized, the dtype, the job): Parquet in its key-value schema metadata
(`embedq.model`, ...), JSONL as `model` and `revision` on every line, NPY in a
`.meta.json` beside it (numpy refuses an NPY header with keys of its own).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from embedq import wire
from embedq.errors import InvalidInput
from embedq.jobs.store import JobStore, ResultRow
from embedq.models import Job

EXPORT_FORMATS = {".parquet": "parquet", ".npy": "npy", ".jsonl": "jsonl"}
ROW_GROUP = 2000


def export_format(path: Path) -> str:
    fmt = EXPORT_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise InvalidInput(
            f"cannot export to {path.name!r}: name the file .parquet, .npy or .jsonl", "out"
        )
    return fmt


def ids_sidecar(path: Path) -> Path:
    """Where the NPY export writes ids and errors, one JSON object a line."""
    return path.with_suffix(".ids.jsonl")


def meta_sidecar(path: Path) -> Path:
    """Where the NPY export writes its `provenance`, one JSON object."""
    return path.with_suffix(".meta.json")


def provenance(job: Job, dim: int) -> dict[str, str]:
    """Where a job's vectors came from and what they are, as text (Parquet's metadata
    holds bytes): model, revision, dimensions, normalize, dtype and the job's id."""
    return {"model": job.model, "revision": job.revision, "dimensions": str(dim),
            "normalize": "true" if job.normalize else "false", "dtype": "float32",
            "job": job.id}


def export(store: JobStore, job_id: str, out: str | Path) -> int:
    """Write every item of the job to `out` in input order; return how many rows."""
    path = Path(out)
    fmt = export_format(path)
    job = store.get(job_id)
    rows = store.results(job_id, 0, max(job.total, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        return _jsonl(rows, path, {"model": job.model, "revision": job.revision})
    dim = _dimension(store, job_id, job.dimensions)
    meta = provenance(job, dim)
    if fmt == "npy":
        meta_sidecar(path).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        return _npy(rows, path, job.total, dim)
    return _parquet(rows, path, dim, meta)


def _dimension(store: JobStore, job_id: str, declared: int | None) -> int:
    if declared:
        return declared
    for row in store.results(job_id, 0, 1 << 31):
        if row.vector is not None:
            return len(row.vector) // 4
    return 0


def _jsonl(rows: Iterator[ResultRow], path: Path, source: dict[str, str]) -> int:
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            item: dict[str, Any] = {"index": row.index, "id": row.id, **source}
            if row.vector is not None:
                item["embedding"] = wire.floats(row.vector)
            else:
                item["error"] = row.error or "not embedded yet"
            fh.write(json.dumps(item, separators=(",", ":")) + "\n")
            n += 1
    return n


def _npy(rows: Iterator[ResultRow], path: Path, total: int, dim: int) -> int:
    from numpy.lib import format as npy_format

    blank = np.full(dim, np.nan, dtype="<f4").tobytes()
    n = 0
    with path.open("wb") as fh, ids_sidecar(path).open("w", encoding="utf-8") as ids:
        npy_format.write_array_header_1_0(
            fh, {"descr": "<f4", "fortran_order": False, "shape": (total, dim)}
        )
        for row in rows:
            fh.write(row.vector if row.vector is not None else blank)
            _sidecar_line(ids, row)
            n += 1
    return n


def _sidecar_line(ids: IO[str], row: ResultRow) -> None:
    error = None if row.vector is not None else (row.error or "not embedded yet")
    ids.write(json.dumps({"index": row.index, "id": row.id, "error": error}) + "\n")


def _parquet(rows: Iterator[ResultRow], path: Path, dim: int, meta: dict[str, str]) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    vector_type = pa.list_(pa.float32(), dim) if dim else pa.list_(pa.float32())
    schema = pa.schema([
        ("index", pa.int64()), ("id", pa.string()), ("embedding", vector_type),
        ("error", pa.string()),
    ], metadata={f"embedq.{k}".encode(): v.encode() for k, v in meta.items()})
    n = 0
    with pq.ParquetWriter(path, schema) as writer:
        page: list[ResultRow] = []
        for row in rows:
            page.append(row)
            if len(page) >= ROW_GROUP:
                writer.write_table(_table(page, schema, vector_type))
                n += len(page)
                page = []
        if page or n == 0:
            writer.write_table(_table(page, schema, vector_type))
            n += len(page)
    return n


def _table(page: list[ResultRow], schema: Any, vector_type: Any) -> Any:
    import pyarrow as pa

    vectors = [
        np.frombuffer(r.vector, dtype="<f4") if r.vector is not None else None for r in page
    ]
    return pa.table({
        "index": pa.array([r.index for r in page], pa.int64()),
        "id": pa.array([r.id for r in page], pa.string()),
        "embedding": pa.array(vectors, vector_type),
        "error": pa.array(
            [None if r.vector is not None else (r.error or "not embedded yet") for r in page],
            pa.string(),
        ),
    }, schema=schema)
