"""The Python client: `Client().embed(texts)` returns vectors in input order.

With no EMBEDQ_* variables it runs embedded (SQLite, in-process broker and worker); with
EMBEDQ_BROKER_URL / EMBEDQ_REDIS_URL / EMBEDQ_DATABASE_URL it joins a cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from embedq.config import Settings
from embedq.deployment import Deployment
from embedq.service import EmbedResult, Vector

if TYPE_CHECKING:
    from embedq.semantic import LookupResult, SemanticCache


class Client:
    def __init__(self, settings: Settings | None = None) -> None:
        self.deployment = Deployment.from_settings(settings)
        self.service = self.deployment.service

    def embed(
        self,
        texts: list[str] | str,
        *,
        model: str | None = None,
        dimensions: int | None = None,
        normalize: bool | None = None,
        timeout_s: float | None = None,
        precision: str | None = None,
    ) -> list[Vector]:
        """One float32 vector per text, in input order; raises if any text failed.
        `precision` picks a served tier (EMBEDQ_TIERS, e.g. "int8"); default the first."""
        return self.embed_detailed(
            texts, model=model, dimensions=dimensions, normalize=normalize,
            timeout_s=timeout_s, precision=precision,
        ).vectors()

    def embed_detailed(
        self,
        texts: list[str] | str,
        *,
        model: str | None = None,
        dimensions: int | None = None,
        normalize: bool | None = None,
        timeout_s: float | None = None,
        precision: str | None = None,
    ) -> EmbedResult:
        """Per-input outcomes (vector or error, and where it came from)."""
        batch = [texts] if isinstance(texts, str) else list(texts)
        return self.service.embed(
            batch, model=model, dimensions=dimensions, normalize=normalize,
            timeout_s=timeout_s, precision=precision,
        )

    def stats(self) -> dict[str, int]:
        return self.service.stats()

    # --- the semantic cache (loaded on first use; see embedq/semantic)
    @property
    def semantic(self) -> SemanticCache:
        if getattr(self, "_semantic", None) is None:
            from embedq.semantic import SemanticCache

            self._semantic = SemanticCache(self.service)
        return self._semantic

    def cache_put(self, namespace: str, query: str, payload: Any, **options: Any) -> int:
        """Store (query, payload); options: ttl_s, sliding, metadata. Returns the entry id."""
        return self.semantic.put(namespace, query, payload, **options)

    def cache_lookup(self, namespace: str, query: str, **options: Any) -> LookupResult:
        """Entries meaning the same as `query`; options: threshold, k, filter, explain
        (LookupResult.considered: every candidate, its score, why it was refused and the
        checks it passed)."""
        return self.semantic.lookup(namespace, query, **options)

    def cache_delete(self, namespace: str, entry_id: int | None = None) -> int:
        """Delete one entry, or the whole namespace when no id is given; returns how many."""
        if entry_id is None:
            return self.semantic.drop(namespace)
        self.semantic.delete(namespace, entry_id)
        return 1

    def cache_stats(self, namespace: str) -> dict[str, Any]:
        """Entries, hits, misses, the index, the threshold the namespace runs at, and its
        served hits by feedback (`served`: correct, wrong, unverified)."""
        return self.semantic.stats(namespace)

    def cache_configure(self, namespace: str, *, max_false_hit_rate: float | None = None,
                        threshold: float | None = None,
                        trust_score: float | None = None) -> dict[str, Any]:
        """Set the namespace's error budget and base threshold (None: none, the default)
        and, under a budget, its trust score (None: the verifier refuses as it does by
        default; see docs/semantic-cache.md, "Finding more under a budget")."""
        return self.semantic.configure(namespace, max_false_hit_rate=max_false_hit_rate,
                                       threshold=threshold, trust_score=trust_score)

    def cache_feedback(self, namespace: str, hit_id: str, correct: bool) -> dict[str, Any]:
        """Say whether a served match (its `hit_id`) was right; returns the threshold the
        namespace now runs at."""
        return self.semantic.give_feedback(namespace, hit_id, correct)

    def close(self) -> None:
        if getattr(self, "_semantic", None) is not None:
            self._semantic.close()
        self.deployment.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
