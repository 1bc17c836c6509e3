"""The semantic cache: (query, payload) entries in namespaces, found again by meaning.

    service.py   SemanticCache: embed -> index -> table
    index.py     VectorIndex: FAISS (flat, IVF; GPU when present) and an exact fake
    store.py     the tables: entries, the change log, namespace counters
    sync.py      IndexSync: load, follow the change log by watermark, compact, rebuild
    snapshot.py  index snapshots on disk under Settings.data_dir
    commands.py  `embedq cache put|lookup|delete|stats`
"""

from embedq.cache.semantic.index import ExactIndex, FaissIndex, IndexConfig, VectorIndex
from embedq.cache.semantic.service import LookupResult, Match, SemanticCache, space_of

__all__ = [
    "ExactIndex", "FaissIndex", "IndexConfig", "LookupResult", "Match", "SemanticCache",
    "VectorIndex", "space_of",
]
