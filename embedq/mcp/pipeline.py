"""The process-wide async pipeline the MCP tools share: single flight -> service."""

from __future__ import annotations

import asyncio

from embedq.errors import EmbedqError
from embedq.fingerprint import fingerprint
from embedq.service import EmbeddingService, Vector
from embedq.singleflight import SingleFlight


class AsyncPipeline:
    """Embeds through one SingleFlight per process in front of the cross-process claim."""

    def __init__(self, service: EmbeddingService) -> None:
        self.service = service
        self.flights: SingleFlight[str, Vector] = SingleFlight("embed")

    async def embed(self, texts: list[str], model: str | None = None,
                    tenant: str | None = None) -> list[Vector | EmbedqError]:
        """Outcomes in input order; `tenant` (the caller's) enters the fingerprints under
        strict isolation, and so the single-flight keys too."""
        spec = self.service.spec(model, tenant=tenant)
        fps = [fingerprint(spec, t) for t in texts]
        text_of = dict(zip(fps, texts, strict=True))

        async def compute(keys: list[str]) -> dict[str, Vector | BaseException]:
            result = await asyncio.to_thread(
                self.service.embed, [text_of[k] for k in keys], model=model, tenant=tenant
            )
            return {
                k: (o.error if o.error is not None else o.vector)  # type: ignore[misc]
                for k, o in zip(keys, result.outcomes, strict=True)
            }

        outcomes = await self.flights.run_many(fps, compute)
        return [
            o if isinstance(o, EmbedqError) or not isinstance(o, BaseException)
            else EmbedqError(str(o))
            for o in outcomes
        ]
