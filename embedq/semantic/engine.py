"""What `SemanticCache` asks of the engine that finds its candidates.

Two engines answer it, chosen by EMBEDQ_SEMANTIC_INDEX:
  faiss, exact  `IndexSync` (sync.py): a replica per namespace in this process, following
                the change log;
  pgvector      `PgvectorSearch` (pgvector.py): the table's own HNSW index in Postgres;
                this process holds no copy and follows nothing.
Either way the table is the source of truth and the lookup's decisions (threshold, guard,
verifier, filter, expiry, negatives) are the service's, made on the candidates returned.
"""

from __future__ import annotations

from typing import Any, Protocol

from embedq.semantic.index import Hit, Matrix

PGVECTOR = "pgvector"


class CandidateSearch(Protocol):
    def start(self) -> None:
        """Be ready to search (load a replica, or check the server can); ConfigError if not."""

    def search(self, namespace: str, vector: Matrix, k: int) -> list[Hit]:
        """The namespace's `k` stored entries nearest `vector` (cosine), best first; expired
        ones included: the service reads the rows and refuses those."""

    def catch_up(self) -> int:
        """Take in this process's own writes at once (read-your-writes)."""

    def describe(self, namespace: str) -> dict[str, object]:
        """The index's part of `embedq cache stats`, with `loaded_from`: where the
        namespace's vectors came from (snapshot, table; postgres for pgvector)."""

    def memory(self) -> dict[str, Any]:
        """What this process holds of the cache's vectors, against its budget (the
        `replica` block of stats; /metrics' embedq_semantic_replica_*)."""

    def close(self, save: bool = True) -> None: ...
