"""Index snapshots on disk, one per namespace: a fast load when current, never a source of
truth.

Layout, under `Settings.data_dir / "semantic" / <space>`, for each namespace saved:
    <digest>.json   {"version": 2, "space", "namespace", "watermark", "marker", "saved_at",
                     "file", "kind", "trained_for", "count", "dimension"}
    <digest>-<watermark>-<pid>.faiss (or .npz for the exact index; no file when empty)

The data file is written first and the namespace's json replaced atomically last, so a
reader sees either the old snapshot or the new one. A snapshot is used only when its
watermark is at or past the change log's pruned horizon (nothing it missed was pruned)
and the change it saw last still reads the same (it came from this database); any trouble
reading it means "load from the table instead". One file per namespace, so a process that
holds some namespaces saves them without rewriting (or losing) another process's others.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embedq.semantic.index import ExactIndex, FaissIndex, IndexConfig, VectorIndex

log = logging.getLogger("embedq.semantic")
VERSION = 2


@dataclass
class Snapshot:
    watermark: int
    index: VectorIndex | None  # None: the namespace held no vector


def folder(data_dir: Path, space: str) -> Path:
    return data_dir / "semantic" / space


Marker = list[Any] | None


def _digest(namespace: str) -> str:
    return hashlib.sha256(namespace.encode()).hexdigest()[:16]


def save(data_dir: Path, space: str, namespace: str, watermark: int,
         index: VectorIndex | None, marker: Marker = None) -> Path:
    """Write the namespace's index, then its json; remove the file the old json named."""
    where = folder(data_dir, space)
    where.mkdir(parents=True, exist_ok=True)
    stem = _digest(namespace)
    old = _read_json(where / f"{stem}.json")
    entry: dict[str, Any] = {"file": None, "kind": None, "trained_for": 0, "count": 0,
                             "dimension": 0}
    if index is not None:
        name = f"{stem}-{watermark}-{os.getpid()}"
        if isinstance(index, FaissIndex):
            name += ".faiss"
            index.save(where / name)
            trained_for = index.trained_for
        elif isinstance(index, ExactIndex):
            name += ".npz"
            index.save(where / name)
            trained_for = 0
        else:
            raise TypeError(f"cannot snapshot a {type(index).__name__}")
        entry = {"file": name, "kind": index.kind, "trained_for": trained_for,
                 "count": len(index), "dimension": index.dimension}
    doc = {"version": VERSION, "space": space, "namespace": namespace,
           "watermark": watermark, "marker": marker, "saved_at": time.time(), **entry}
    tmp = where / f"{stem}.json.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, where / f"{stem}.json")
    if old and old.get("file") and old.get("file") != entry["file"]:
        (where / str(old["file"])).unlink(missing_ok=True)
    return where


def load(data_dir: Path, space: str, namespace: str, config: IndexConfig, horizon: int,
         marker_at: Callable[[int], Marker]) -> Snapshot | None:
    """The namespace's snapshot if it is usable: current format, not older than
    `horizon`, and taken from this database (`marker_at(watermark)`, the change the
    snapshot saw last, still reads the same: a data dir shared with another database
    never leaks its index)."""
    doc = _read_json(folder(data_dir, space) / f"{_digest(namespace)}.json")
    if not doc or doc.get("version") != VERSION or doc.get("space") != space or (
            doc.get("namespace") != namespace):
        return None
    watermark = int(doc.get("watermark", -1))
    if watermark < horizon:
        log.info("semantic snapshot of %s at %d predates the pruned log (%d): reloading",
                 namespace, watermark, horizon)
        return None
    if doc.get("marker") != marker_at(watermark):
        log.info("semantic snapshot of %s at %d was taken from another database: reloading",
                 namespace, watermark)
        return None
    if not doc.get("file"):
        return Snapshot(watermark, None)
    path = folder(data_dir, space) / str(doc["file"])
    try:
        index: VectorIndex
        if doc["kind"] == "exact":
            index = ExactIndex.load(path, int(doc["dimension"]))
        else:
            index = FaissIndex.load(path, str(doc["kind"]), int(doc["trained_for"]), config)
    except (OSError, RuntimeError, KeyError, ValueError) as exc:
        log.warning("semantic snapshot of %s unreadable (%s): reloading from the table",
                    namespace, exc)
        return None
    return Snapshot(watermark, index)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
