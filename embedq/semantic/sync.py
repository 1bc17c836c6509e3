"""Keeping this process's indexes in step with the table, by change-log watermark.

`IndexSync` holds, for the process's space, the indexes of the namespaces it was asked
for, within a memory budget (residency.py): a namespace loads on its first lookup (its
snapshot when current, else its rows, read with the watermark they are exact at) and the
least recently used are dropped past the budget (saved as snapshots first, so they load
fast when asked for again). It follows `semantic_changes` for the namespaces it holds
alone, every `interval_s` in a thread and at once after this process's own writes, and
reads nothing when it holds none. Applying a namespace's changes in `seq` order past its
watermark is exact (locks.py): a put whose entry is already gone is skipped (its delete
follows and is skipped too), so no id is counted twice and nothing is missed. A crash
between the table write and the index update loses nothing: the change is in the log and
the next catch-up (here or in any process) applies it.

Upkeep on the same thread: compaction (tombstones past `compact_deletes` are removed),
rebuilds (flat promoted to IVF, or IVF retrained when its size moved 4x) built outside the
lock from a copy and swapped in after replaying the changes made meanwhile, the expiry
sweep, change-log pruning, and periodic snapshots.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from embedq.errors import EmbedqError
from embedq.semantic import snapshot
from embedq.semantic.changes import FOLLOW_BATCH, Change
from embedq.semantic.index import (
    Hit,
    Ids,
    IndexConfig,
    Matrix,
    VectorIndex,
    build_index,
    wants_rebuild,
)
from embedq.semantic.residency import MB, Residency
from embedq.semantic.store import SemanticStore, utcnow

log = logging.getLogger("embedq.semantic")


@dataclass(frozen=True)
class SyncConfig:
    interval_s: float = 0.2
    upkeep_interval_s: float = 5.0
    sweep_interval_s: float = 30.0
    snapshot_interval_s: float = 300.0
    compact_deletes: int = 256
    change_retention_s: float = 7 * 86_400.0
    memory_mb: int = 1024


@dataclass
class _Rebuild:
    journal: list[tuple[str, list[int], Matrix | None]]


def _vectors(blobs: list[bytes]) -> Matrix:
    return np.frombuffer(b"".join(blobs), dtype="<f4").astype(np.float32).reshape(len(blobs), -1)


class IndexSync:
    def __init__(
        self, store: SemanticStore, space: str, data_dir: Path, index_config: IndexConfig,
        config: SyncConfig, sweeps: Sequence[Callable[[datetime], object]] = (),
    ) -> None:
        """`sweeps` run with the expiry sweep (the error budget's served hits)."""
        self.store = store
        self.sweeps = tuple(sweeps)
        self.space = space
        self.data_dir = data_dir
        self.index_config = index_config
        self.config = config
        self.indexes: dict[str, VectorIndex] = {}  # held namespaces with vectors
        self.residency = Residency(config.memory_mb * MB)
        self.saved: dict[str, int] = {}  # namespace -> watermark of its snapshot on disk
        self.loaded_from: dict[str, str] = {}  # held namespace -> "snapshot" | "table"
        self.load_seconds: dict[str, float] = {"snapshot": 0.0, "table": 0.0}
        self.load_counts: dict[str, int] = {"snapshot": 0, "table": 0}
        self.last_sync: datetime | None = None
        self._skipped: set[int] = set()
        self._rebuilds: dict[str, _Rebuild] = {}
        self._loading: dict[str, threading.Event] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- start and stop
    def start(self) -> None:
        """Start following (nothing is loaded until a namespace is asked for)."""
        self._thread = threading.Thread(target=self._run, name="embedq-semantic-sync",
                                        daemon=True)
        self._thread.start()

    def close(self, save: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if save:
            self.save_snapshot()

    # --- holding namespaces
    def hold(self, namespace: str) -> None:
        """Make `namespace` held and current: the most recently used, loaded if it was not
        (then the least recently used past the budget are dropped). The load reads the
        snapshot or the table outside the lock, so lookups in held namespaces go on; a
        second caller for the same namespace waits for the first's load."""
        while True:
            with self._lock:
                if self.residency.touch(namespace):
                    return
                loading = self._loading.get(namespace)
                if loading is None:
                    loading = self._loading[namespace] = threading.Event()
                    break
            loading.wait()
        try:
            started = time.perf_counter()
            watermark, index, source = self._read(namespace)
            with self._lock:
                if index is not None:
                    self.indexes[namespace] = index
                if source == "snapshot":
                    self.saved[namespace] = watermark
                self.residency.admit(namespace, watermark)
                self.loaded_from[namespace] = source
                self.catch_up()
                self.load_seconds[source] += time.perf_counter() - started
                self.load_counts[source] += 1
                self._shed(keep=namespace)
            log.info("semantic %s loaded from %s: %d vectors, watermark %d", namespace,
                     source, len(index) if index is not None else 0, watermark)
        finally:
            with self._lock:
                self._loading.pop(namespace, None)
            loading.set()

    def _read(self, namespace: str) -> tuple[int, VectorIndex | None, str]:
        """(watermark, index or None when empty, "snapshot" | "table"): the namespace's
        current snapshot, else its rows read with the watermark they are exact at."""
        found = snapshot.load(self.data_dir, self.space, namespace, self.index_config,
                              self.store.pruned_horizon(), self.store.change_marker)
        if found is not None:
            return found.watermark, found.index, "snapshot"
        watermark, ids, blobs = self.store.namespace_vectors(namespace, self.space)
        if not ids:
            return watermark, None, "table"
        vectors = _vectors(blobs)
        return watermark, build_index(np.asarray(ids, dtype=np.int64), vectors,
                                      vectors.shape[1], self.index_config), "table"

    def _shed(self, keep: str | None = None) -> None:
        """Drop the least recently used namespaces past the budget (saved first); never
        `keep`, by default the most recently used."""
        held = self.residency.held()
        keep = keep if keep is not None else (held[-1] if held else None)
        sizes = {ns: index.memory_bytes() for ns, index in self.indexes.items()}
        for namespace in self.residency.over_budget(sizes, keep):
            self._save(namespace)
            self.indexes.pop(namespace, None)
            self._rebuilds.pop(namespace, None)
            self.loaded_from.pop(namespace, None)
            self.residency.drop(namespace)
            log.info("semantic %s dropped from memory (EMBEDQ_SEMANTIC_MEMORY_MB=%d)",
                     namespace, self.config.memory_mb)

    # --- reads
    def search(self, namespace: str, vector: Matrix, k: int) -> list[Hit]:
        while True:
            self.hold(namespace)
            with self._lock:
                if self.residency.touch(namespace):  # else dropped by another's load
                    index = self.indexes.get(namespace)
                    return index.search(vector, k) if index is not None else []

    def describe(self, namespace: str) -> dict[str, object]:
        """The namespace's index in this process (nothing is loaded to answer)."""
        with self._lock:
            index = self.indexes.get(namespace)
            return {
                "held": namespace in self.residency,
                "index_kind": index.kind if index is not None else None,
                "index_vectors": len(index) if index is not None else 0,
                "index_bytes": index.memory_bytes() if index is not None else 0,
                "watermark": self.residency.watermarks.get(namespace),
                "last_sync": self.last_sync.isoformat() if self.last_sync else None,
                "loaded_from": self.loaded_from.get(namespace),
            }

    def memory(self) -> dict[str, Any]:
        """This process's replica: what it holds against its budget, and its churn."""
        with self._lock:
            sizes = {ns: index.memory_bytes() for ns, index in self.indexes.items()}
            return {
                "namespaces": len(self.residency),
                "entries": sum(len(index) for index in self.indexes.values()),
                "bytes": self.residency.cost(sizes),
                "budget_bytes": self.residency.budget_bytes,
                "loads": self.residency.loads,
                "evictions": self.residency.evictions,
                "loads_from": dict(self.load_counts),
                "load_seconds": {k: round(v, 4) for k, v in self.load_seconds.items()},
            }

    # --- following the log
    def catch_up(self) -> int:
        """Apply every change of the held namespaces past their watermarks; return how
        many were read. Holding none, it reads nothing."""
        total = 0
        with self._lock:
            while len(self.residency):
                watermark, changes = self.store.follow(self.residency.held(),
                                                       self.residency.low_watermark())
                self._apply(changes)
                self.residency.advance(watermark)
                total += len(changes)
                if len(changes) < FOLLOW_BATCH:
                    break
            self.last_sync = utcnow()
            if total:
                self._shed()
        return total

    def _apply(self, changes: list[Change]) -> None:
        fresh = [c for c in changes if self.residency.behind(c.namespace, c.seq)]
        for op, namespace, group in _runs(fresh):
            if op == "put":
                present = [c for c in group if c.vector is not None and c.space == self.space]
                self._skipped.update(c.entry_id for c in group if c.vector is None)
                if present:
                    vectors = _vectors([c.vector for c in present if c.vector is not None])
                    self._mutate(namespace, [c.entry_id for c in present], vectors)
            elif op == "delete":
                ids = [c.entry_id for c in group
                       if c.space == self.space and not self._discard_skipped(c.entry_id)]
                if ids and namespace in self.indexes:
                    self._mutate(namespace, ids, None)
            elif op == "drop":
                self.indexes.pop(namespace, None)
                self._rebuilds.pop(namespace, None)

    def _discard_skipped(self, entry_id: int) -> bool:
        if entry_id in self._skipped:
            self._skipped.discard(entry_id)
            return True
        return False

    def _mutate(self, namespace: str, ids: list[int], vectors: Matrix | None) -> None:
        index = self.indexes.get(namespace)
        if vectors is not None:
            if index is None:
                index = build_index(np.zeros(0, dtype=np.int64), vectors[:0], vectors.shape[1],
                                    self.index_config)
                self.indexes[namespace] = index
            index.add(ids, vectors)
        elif index is not None:
            index.remove(ids)
        rebuild = self._rebuilds.get(namespace)
        if rebuild is not None:
            rebuild.journal.append(("add" if vectors is not None else "remove", ids, vectors))

    # --- upkeep
    def _run(self) -> None:
        next_upkeep = next_sweep = time.monotonic()
        next_save = time.monotonic() + self.config.snapshot_interval_s
        while not self._stop.wait(self.config.interval_s):
            try:
                self.catch_up()
                now = time.monotonic()
                if now >= next_sweep:
                    next_sweep = now + self.config.sweep_interval_s
                    self.store.sweep_expired()
                    for sweep in self.sweeps:
                        sweep(utcnow())
                    self.store.prune_changes(self.config.change_retention_s)
                if now >= next_upkeep:
                    next_upkeep = now + self.config.upkeep_interval_s
                    self.upkeep()
                if now >= next_save:
                    next_save = now + self.config.snapshot_interval_s
                    self.save_snapshot()
            except EmbedqError as exc:
                log.warning("semantic sync: %s (retrying)", exc)
            except Exception:
                log.exception("semantic sync failed (retrying)")

    def upkeep(self, wait: bool = False) -> None:
        """Compact indexes with many tombstones; start rebuilds where another shape fits."""
        workers = []
        with self._lock:
            for namespace, index in self.indexes.items():
                if len(index.deleted) >= self.config.compact_deletes:
                    gone = index.compact()
                    log.info("semantic %s: compacted %d deleted vectors", namespace, gone)
                if wants_rebuild(index, self.index_config) and namespace not in self._rebuilds:
                    self._rebuilds[namespace] = _Rebuild([])
                    ids, vectors = index.contents()
                    worker = threading.Thread(
                        target=self._rebuild, args=(namespace, ids, vectors, index.dimension),
                        name=f"embedq-semantic-rebuild-{namespace}", daemon=True,
                    )
                    worker.start()
                    workers.append(worker)
        if wait:
            for worker in workers:
                worker.join()

    def _rebuild(self, namespace: str, ids: Ids, vectors: Matrix, dimension: int) -> None:
        started = time.perf_counter()
        try:
            fresh = build_index(ids, vectors, dimension, self.index_config)
        except Exception:
            log.exception("semantic %s: rebuild failed; keeping the current index", namespace)
            with self._lock:
                self._rebuilds.pop(namespace, None)
            return
        with self._lock:
            rebuild = self._rebuilds.pop(namespace, None)
            if rebuild is None or namespace not in self.indexes:
                return  # the namespace was dropped meanwhile
            for op, op_ids, op_vectors in rebuild.journal:
                if op == "add" and op_vectors is not None:
                    fresh.add(op_ids, op_vectors)
                else:
                    fresh.remove(op_ids)
            self.indexes[namespace] = fresh
        log.info("semantic %s: rebuilt as %s with %d vectors in %.2f s", namespace, fresh.kind,
                 len(fresh), time.perf_counter() - started)

    def save_snapshot(self) -> None:
        """Save every held namespace whose snapshot is behind."""
        with self._lock:
            for namespace in self.residency.held():
                self._save(namespace)

    def _save(self, namespace: str) -> None:
        watermark = self.residency.watermarks.get(namespace)
        if watermark is None or self.saved.get(namespace) == watermark:
            return
        try:
            snapshot.save(self.data_dir, self.space, namespace, watermark,
                          self.indexes.get(namespace), self.store.change_marker(watermark))
        except OSError as exc:  # a snapshot only speeds a load up: the table stays
            log.warning("semantic snapshot of %s not saved: %s", namespace, exc)
            return
        self.saved[namespace] = watermark


def _runs(changes: list[Change]) -> list[tuple[str, str, list[Change]]]:
    """Consecutive changes with the same op and namespace, grouped to batch index calls."""
    runs: list[tuple[str, str, list[Change]]] = []
    for change in changes:
        if runs and runs[-1][0] == change.op and runs[-1][1] == change.namespace:
            runs[-1][2].append(change)
        else:
            runs.append((change.op, change.namespace, [change]))
    return runs
