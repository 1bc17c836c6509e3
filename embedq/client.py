"""The Python client: `Client().embed(texts)` returns vectors in input order.

With no EMBEDQ_* variables it runs embedded (SQLite, in-process broker and worker); with
EMBEDQ_BROKER_URL / EMBEDQ_REDIS_URL / EMBEDQ_DATABASE_URL it joins a cluster.
"""

from __future__ import annotations

from embedq.config import Settings
from embedq.service import EmbeddingService, EmbedResult, Vector


class Client:
    def __init__(self, settings: Settings | None = None) -> None:
        self.service = EmbeddingService.from_settings(settings)

    def embed(
        self,
        texts: list[str] | str,
        *,
        model: str | None = None,
        dimensions: int | None = None,
        normalize: bool | None = None,
        timeout_s: float | None = None,
    ) -> list[Vector]:
        """One float32 vector per text, in input order; raises if any text failed."""
        return self.embed_detailed(
            texts, model=model, dimensions=dimensions, normalize=normalize, timeout_s=timeout_s
        ).vectors()

    def embed_detailed(
        self,
        texts: list[str] | str,
        *,
        model: str | None = None,
        dimensions: int | None = None,
        normalize: bool | None = None,
        timeout_s: float | None = None,
    ) -> EmbedResult:
        """Per-input outcomes (vector or error, and where it came from)."""
        batch = [texts] if isinstance(texts, str) else list(texts)
        return self.service.embed(
            batch, model=model, dimensions=dimensions, normalize=normalize, timeout_s=timeout_s
        )

    def stats(self) -> dict[str, int]:
        return self.service.stats()

    def close(self) -> None:
        self.service.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
