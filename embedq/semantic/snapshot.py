"""Index snapshots on disk: a fast start when they are current, never a source of truth.

Layout, under `Settings.data_dir / "semantic" / <space>`:
    manifest.json   {"version": 1, "space", "watermark", "saved_at",
                     "indexes": {namespace: {"file", "kind", "trained_for", "count"}}}
    <digest>-<watermark>-<pid>.faiss (or .npz for the exact index)

Files are written first and the manifest is replaced atomically last, so a reader sees
either the old snapshot or the new one. A snapshot is used only when its watermark is at
or past the change log's pruned horizon (nothing it missed was pruned); any trouble
reading it means "load from the table instead".
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
VERSION = 1


@dataclass
class Snapshot:
    watermark: int
    indexes: dict[str, VectorIndex]


def folder(data_dir: Path, space: str) -> Path:
    return data_dir / "semantic" / space


Marker = list[Any] | None


def save(data_dir: Path, space: str, watermark: int, indexes: dict[str, VectorIndex],
         marker: Marker = None) -> Path:
    """Write every index and then the manifest; remove the files the old manifest named."""
    where = folder(data_dir, space)
    where.mkdir(parents=True, exist_ok=True)
    old = _read_manifest(where / "manifest.json")
    entries: dict[str, Any] = {}
    for namespace, index in indexes.items():
        stem = f"{hashlib.sha256(namespace.encode()).hexdigest()[:16]}-{watermark}-{os.getpid()}"
        if isinstance(index, FaissIndex):
            name = stem + ".faiss"
            index.save(where / name)
            trained_for = index.trained_for
        elif isinstance(index, ExactIndex):
            name = stem + ".npz"
            index.save(where / name)
            trained_for = 0
        else:
            raise TypeError(f"cannot snapshot a {type(index).__name__}")
        entries[namespace] = {"file": name, "kind": index.kind, "trained_for": trained_for,
                              "count": len(index), "dimension": index.dimension}
    manifest = {"version": VERSION, "space": space, "watermark": watermark,
                "marker": marker, "saved_at": time.time(), "indexes": entries}
    tmp = where / f"manifest.json.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(manifest))
    os.replace(tmp, where / "manifest.json")
    if old:
        keep = {e["file"] for e in entries.values()}
        for entry in old.get("indexes", {}).values():
            if entry.get("file") not in keep:
                (where / str(entry.get("file"))).unlink(missing_ok=True)
    return where


def load(data_dir: Path, space: str, config: IndexConfig, horizon: int,
         marker_at: Callable[[int], Marker]) -> Snapshot | None:
    """The snapshot for `space` if it is usable: current format, not older than `horizon`,
    and taken from this database (`marker_at(watermark)`, the change the snapshot saw last,
    still reads the same: a data dir shared with another database never leaks its index)."""
    where = folder(data_dir, space)
    manifest = _read_manifest(where / "manifest.json")
    if not manifest or manifest.get("version") != VERSION or manifest.get("space") != space:
        return None
    watermark = int(manifest.get("watermark", -1))
    if watermark < horizon:
        log.info("semantic snapshot at %d predates the pruned log (%d): reloading", watermark,
                 horizon)
        return None
    if manifest.get("marker") != marker_at(watermark):
        log.info("semantic snapshot at %d was taken from another database: reloading",
                 watermark)
        return None
    indexes: dict[str, VectorIndex] = {}
    try:
        for namespace, entry in manifest["indexes"].items():
            path = where / entry["file"]
            if entry["kind"] == "exact":
                indexes[namespace] = ExactIndex.load(path, int(entry["dimension"]))
            else:
                indexes[namespace] = FaissIndex.load(path, entry["kind"],
                                                     int(entry["trained_for"]), config)
    except (OSError, RuntimeError, KeyError, ValueError) as exc:
        log.warning("semantic snapshot unreadable (%s): reloading from the table", exc)
        return None
    return Snapshot(watermark, indexes)


def _read_manifest(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
