"""The semantic cache: (query, payload) entries in namespaces, found again by meaning.

    service.py   SemanticCache: embed -> index -> table
    index.py     VectorIndex: FAISS (flat, IVF; GPU when present) and an exact fake
    store.py     the tables: entries, the change log, namespace counters
    sync.py      IndexSync: load, follow the change log by watermark, compact, rebuild
    snapshot.py  index snapshots on disk under Settings.data_dir
    commands.py  `embedq cache put|lookup|delete|stats`
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from embedq.semantic.index import ExactIndex, FaissIndex, IndexConfig, VectorIndex

if TYPE_CHECKING:
    from embedq.semantic.service import LookupResult, Match, SemanticCache, space_of

__all__ = [
    "ExactIndex", "FaissIndex", "IndexConfig", "LookupResult", "Match", "SemanticCache",
    "VectorIndex", "space_of",
]


def __getattr__(name: str) -> Any:
    # The service needs the tables (SQLAlchemy) and the encoders: imported on first use, so
    # the index alone imports with FAISS and numpy (`embedq bench gpu` on a GPU machine).
    if name in {"LookupResult", "Match", "SemanticCache", "space_of"}:
        from embedq.semantic import service

        return getattr(service, name)
    raise AttributeError(f"module 'embedq.semantic' has no attribute {name!r}")
