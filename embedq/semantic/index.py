"""Vector indexes for the semantic cache: FAISS, and an exact in-memory fake.

Both implement `VectorIndex` over unit-length float32 vectors with int64 ids, so a
search score is the cosine similarity in [-1, 1]. A delete marks a tombstone (cheap, and
the only kind of delete HNSW-style structures allow); searches over-fetch by the number of
tombstones and drop them, and `compact()` removes them for good. An index is a view: it
can always be rebuilt from `contents()` or from the table.

FAISS kinds, chosen by `build_index` from the number of vectors:
  flat   exact inner product (IndexIDMap over IndexFlatIP) up to `flat_max` vectors;
  ivf    IndexIVFFlat past it: vectors stored as float32 (about 1.01x their raw bytes),
         `nlist` = n / `ivf_list_size` lists, `nprobe` lists searched per query.
On a machine with a GPU (faiss-gpu installed) both kinds are built on the GPU.

FAISS runs on the calling thread alone (`_one_thread`): a semantic lookup searches one
vector, where a thread team buys nothing, and the team FAISS's OpenMP runtime would keep
in a process that also runs a CPU model slows every later forward pass (measured on 2
cores: a one-text encode 8.6-8.9 ms instead of 7.1-8.1 ms; docs/history.md, "One thread
runs the model; counters behind the answer").
"""

from __future__ import annotations

import functools
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import faiss
import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]
Ids = npt.NDArray[np.int64]
Hit = tuple[int, float]
F = TypeVar("F", bound=Callable[..., Any])


def _one_thread(method: F) -> F:
    """Run `method` with FAISS's OpenMP team at one thread (the setting is per calling
    thread, so each call sets it: a C call, well under a microsecond)."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        faiss.omp_set_num_threads(1)
        return method(*args, **kwargs)

    return cast(F, wrapper)


@dataclass(frozen=True)
class IndexConfig:
    """How indexes are built; `kind` "faiss" or "exact" (the fake, for tests and checks)."""

    kind: str = "faiss"
    flat_max: int = 20_000
    ivf_list_size: int = 256
    nprobe: int = 24
    use_gpu: bool = True

    def nlist_for(self, n: int) -> int:
        return max(16, n // self.ivf_list_size)


def unit_rows(vectors: Matrix) -> Matrix:
    """Rows scaled to unit length (zero rows stay zero): inner product becomes cosine."""
    out = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(vectors), -1).copy()
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


class VectorIndex(ABC):
    """Ids and unit vectors; `search` answers (id, cosine) best first, tombstones excluded."""

    kind: str

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self.deleted: set[int] = set()

    @abstractmethod
    def _add(self, ids: Ids, vectors: Matrix) -> None: ...

    @abstractmethod
    def _search(self, vector: Matrix, k: int) -> list[Hit]: ...

    @abstractmethod
    def _drop(self, ids: Ids) -> None:
        """Physically remove these (tombstoned) ids."""

    @property
    @abstractmethod
    def stored(self) -> int:
        """Vectors held, tombstones included."""

    @abstractmethod
    def contents(self) -> tuple[Ids, Matrix]:
        """Every live (id, vector), copied: the input of a rebuild."""

    @abstractmethod
    def memory_bytes(self) -> int: ...

    def add(self, ids: Iterable[int], vectors: Matrix) -> None:
        id_arr = np.fromiter(ids, dtype=np.int64)
        if len(id_arr):
            self._add(id_arr, unit_rows(vectors))

    def remove(self, ids: Iterable[int]) -> None:
        self.deleted.update(int(i) for i in ids)

    def search(self, vector: Matrix, k: int) -> list[Hit]:
        live = len(self)
        if live <= 0 or k <= 0:
            return []
        want = min(k + len(self.deleted), self.stored)
        query = unit_rows(np.asarray(vector, dtype=np.float32).reshape(1, -1))
        hits = [(i, s) for i, s in self._search(query, want) if i >= 0 and i not in self.deleted]
        return [(i, max(-1.0, min(1.0, s))) for i, s in hits[:k]]

    def compact(self) -> int:
        """Drop tombstoned vectors; return how many went."""
        gone = len(self.deleted)
        if gone:
            self._drop(np.fromiter(self.deleted, dtype=np.int64))
            self.deleted.clear()
        return gone

    def __len__(self) -> int:
        return self.stored - len(self.deleted)


class ExactIndex(VectorIndex):
    """The fake: a numpy matrix and brute force. Same contract, no FAISS."""

    kind = "exact"

    def __init__(self, dimension: int) -> None:
        super().__init__(dimension)
        self._ids = np.zeros(0, dtype=np.int64)
        self._vectors = np.zeros((0, dimension), dtype=np.float32)

    def _add(self, ids: Ids, vectors: Matrix) -> None:
        self._ids = np.concatenate([self._ids, ids])
        self._vectors = np.vstack([self._vectors, vectors])

    def _search(self, vector: Matrix, k: int) -> list[Hit]:
        scores = self._vectors @ vector[0]
        top = np.argsort(-scores, kind="stable")[:k]
        return [(int(self._ids[i]), float(scores[i])) for i in top]

    def _drop(self, ids: Ids) -> None:
        keep = ~np.isin(self._ids, ids)
        self._ids, self._vectors = self._ids[keep], self._vectors[keep]

    @property
    def stored(self) -> int:
        return len(self._ids)

    def contents(self) -> tuple[Ids, Matrix]:
        keep = ~np.isin(self._ids, np.fromiter(self.deleted, dtype=np.int64))
        return self._ids[keep].copy(), self._vectors[keep].copy()

    def memory_bytes(self) -> int:
        return int(self._ids.nbytes + self._vectors.nbytes)

    def save(self, path: Path) -> None:
        ids, vectors = self.contents()
        with path.open("wb") as fh:
            np.savez(fh, ids=ids, vectors=vectors)

    @classmethod
    def load(cls, path: Path, dimension: int) -> ExactIndex:
        with np.load(path, allow_pickle=False) as data:
            index = cls(dimension)
            index.add(data["ids"].tolist(), data["vectors"])
        return index


_gpu_lock = threading.Lock()
_gpu_resources: Any = None


def gpu_available() -> bool:
    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


def _gpu() -> Any:
    global _gpu_resources
    with _gpu_lock:
        if _gpu_resources is None:
            _gpu_resources = faiss.StandardGpuResources()
        return _gpu_resources


class FaissIndex(VectorIndex):
    """A FAISS index (flat or IVF), on the GPU when one is there and allowed."""

    def __init__(self, dimension: int, index: Any, kind: str, trained_for: int,
                 on_gpu: bool = False) -> None:
        super().__init__(dimension)
        self.index = index
        self.kind = kind
        self.trained_for = trained_for  # n the IVF lists were trained for (0 for flat)
        self.on_gpu = on_gpu

    @classmethod
    @_one_thread
    def empty_flat(cls, dimension: int, config: IndexConfig) -> FaissIndex:
        base = faiss.IndexFlatIP(dimension)
        index: Any = faiss.IndexIDMap(base)
        index.referenced_objects = [base]  # the wrapper does not own `base` in Python
        return cls._placed(index, dimension, "flat", 0, config)

    @classmethod
    def _placed(cls, cpu: Any, dimension: int, kind: str, trained_for: int,
                config: IndexConfig) -> FaissIndex:
        if config.use_gpu and gpu_available():
            return cls(dimension, faiss.index_cpu_to_gpu(_gpu(), 0, cpu), kind, trained_for, True)
        return cls(dimension, cpu, kind, trained_for)

    @classmethod
    @_one_thread
    def trained_ivf(cls, sample: Matrix, n: int, config: IndexConfig) -> FaissIndex:
        dimension = sample.shape[1]
        nlist = min(config.nlist_for(n), max(1, len(sample) // 39))
        quantizer = faiss.IndexFlatIP(dimension)
        cpu: Any = faiss.IndexIVFFlat(quantizer, dimension, nlist, faiss.METRIC_INNER_PRODUCT)
        cpu.referenced_objects = [quantizer]
        cpu.cp.niter = 10  # enough for coarse lists; 25 (the default) triples the build
        cpu.train(sample)
        cpu.nprobe = min(config.nprobe, nlist)
        return cls._placed(cpu, dimension, "ivf", n, config)

    @_one_thread
    def _add(self, ids: Ids, vectors: Matrix) -> None:
        self.index.add_with_ids(vectors, ids)

    @_one_thread
    def _search(self, vector: Matrix, k: int) -> list[Hit]:
        scores, ids = self.index.search(vector, k)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True)]

    @_one_thread
    def _drop(self, ids: Ids) -> None:
        if self.on_gpu:
            # GPU indexes cannot remove in place: copy the live part out and re-add it.
            live_ids, live_vectors = self._contents_skipping(set(ids.tolist()))
            self.index.reset()
            self.index.add_with_ids(live_vectors, live_ids)
            return
        self.index.remove_ids(faiss.IDSelectorBatch(ids))

    @property
    def stored(self) -> int:
        return int(self.index.ntotal)

    def contents(self) -> tuple[Ids, Matrix]:
        return self._contents_skipping(self.deleted)

    @_one_thread
    def _contents_skipping(self, skip: set[int]) -> tuple[Ids, Matrix]:
        cpu = faiss.index_gpu_to_cpu(self.index) if self.on_gpu else self.index
        ids, vectors = _faiss_contents(cpu, self.kind, self.dimension)
        if skip:
            keep = ~np.isin(ids, np.fromiter(skip, dtype=np.int64))
            ids, vectors = ids[keep], vectors[keep]
        return ids, vectors

    def memory_bytes(self) -> int:
        n = self.stored
        d = self.dimension
        if self.kind == "flat":
            return n * (4 * d + 8)
        nlist = int(faiss.extract_index_ivf(self.index).nlist) if not self.on_gpu else 0
        return n * (4 * d + 8) + nlist * 4 * d

    @_one_thread
    def save(self, path: Path) -> None:
        self.compact()
        cpu = faiss.index_gpu_to_cpu(self.index) if self.on_gpu else self.index
        faiss.write_index(cpu, str(path))

    @classmethod
    @_one_thread
    def load(cls, path: Path, kind: str, trained_for: int, config: IndexConfig) -> FaissIndex:
        cpu = faiss.read_index(str(path))
        if kind == "ivf":
            faiss.extract_index_ivf(cpu).nprobe = config.nprobe
        return cls._placed(cpu, int(cpu.d), kind, trained_for, config)


def _faiss_contents(index: Any, kind: str, dimension: int) -> tuple[Ids, Matrix]:
    if kind == "flat":
        n = int(index.ntotal)
        flat: Any = faiss.downcast_index(index.index)
        vectors = faiss.rev_swig_ptr(flat.get_xb(), n * dimension).reshape(n, dimension).copy()
        return faiss.vector_to_array(index.id_map).astype(np.int64), vectors
    ivf = faiss.extract_index_ivf(index)
    lists: Any = ivf.invlists
    id_parts, vector_parts = [], []
    for list_no in range(ivf.nlist):
        size = lists.list_size(list_no)
        if not size:
            continue
        id_parts.append(faiss.rev_swig_ptr(lists.get_ids(list_no), size).copy())
        codes = faiss.rev_swig_ptr(lists.get_codes(list_no), size * dimension * 4)
        vector_parts.append(codes.view(np.float32).reshape(size, dimension).copy())
    if not id_parts:
        return np.zeros(0, dtype=np.int64), np.zeros((0, dimension), dtype=np.float32)
    return np.concatenate(id_parts).astype(np.int64), np.vstack(vector_parts)


def build_index(ids: Ids, vectors: Matrix, dimension: int, config: IndexConfig) -> VectorIndex:
    """A fresh index of the right kind for this many vectors."""
    n = len(ids)
    if config.kind == "exact":
        exact = ExactIndex(dimension)
        exact.add(ids.tolist(), vectors)
        return exact
    unit = unit_rows(vectors) if n else np.zeros((0, dimension), dtype=np.float32)
    if n <= config.flat_max:
        index = FaissIndex.empty_flat(dimension, config)
    else:
        rng = np.random.default_rng(0)
        nlist = config.nlist_for(n)
        take = min(n, nlist * 40)  # FAISS wants >= 39 training points per list
        sample = unit[np.sort(rng.choice(n, size=take, replace=False))] if take < n else unit
        index = FaissIndex.trained_ivf(sample, n, config)
    index.add(ids.tolist(), unit)
    return index


def wants_rebuild(index: VectorIndex, config: IndexConfig) -> bool:
    """True when another kind, or IVF lists trained for a size far from this one, fit better."""
    if not isinstance(index, FaissIndex):
        return False
    live = len(index)
    if index.kind == "flat":
        return live > config.flat_max
    return live <= config.flat_max // 2 or not (
        index.trained_for / 4 <= live <= index.trained_for * 4
    )
