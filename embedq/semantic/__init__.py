"""The semantic cache: (query, payload) entries in namespaces, found again by meaning.

    service.py   SemanticCache: embed -> index -> table
    inputs.py    namespace names and thresholds, checked
    lookup.py    what a lookup returns (Match, LookupResult) and why candidates are refused
    meant.py     the query as meant toward a candidate: typos and short forms the model
                 cannot read, written as the candidate's words, then scored again
    index.py     VectorIndex: FAISS (flat, IVF; GPU when present) and an exact fake
    store.py     the tables: entries, the change log, namespace counters
    changes.py   the change log's reads: changes after a watermark, consistent snapshots
    locks.py     the writers' and followers' advisory locks; why the watermark is exact
    residency.py which namespaces a process holds within EMBEDQ_SEMANTIC_MEMORY_MB
    sync.py      IndexSync: load on first use, follow the change log by watermark, compact,
                 rebuild, drop past the budget
    carry.py     carry entries into another model's space (`embedq models switch default`)
    engine.py    CandidateSearch: what the service asks of IndexSync or PgvectorSearch
    pgvector.py  PgvectorSearch: candidates from Postgres' HNSW index; `index-setup`
    snapshot.py  index snapshots on disk under Settings.data_dir, one per namespace
    commands.py  `embedq cache put|lookup|delete|stats`
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from embedq.semantic.index import ExactIndex, FaissIndex, IndexConfig, VectorIndex

if TYPE_CHECKING:
    from embedq.semantic.lookup import LookupResult, Match
    from embedq.semantic.service import SemanticCache, space_of

__all__ = [
    "ExactIndex", "FaissIndex", "IndexConfig", "LookupResult", "Match", "SemanticCache",
    "VectorIndex", "space_of",
]


def __getattr__(name: str) -> Any:
    # The service needs the tables (SQLAlchemy) and the encoders: imported on first use, so
    # the index alone imports with FAISS and numpy (`embedq bench gpu` on a GPU machine).
    if name in {"LookupResult", "Match"}:
        from embedq.semantic import lookup

        return getattr(lookup, name)
    if name in {"SemanticCache", "space_of"}:
        from embedq.semantic import service

        return getattr(service, name)
    raise AttributeError(f"module 'embedq.semantic' has no attribute {name!r}")
