"""What the API process holds for its lifetime, and how routes (any router) reach it.

`create_app` builds an `ApiState` in its lifespan and keeps it on `app.state.embedq`;
the process's one EmbeddingService is also `app.state.service`. Routers use the
dependencies here: `service: Annotated[EmbeddingService, Depends(get_service)]`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request

from embedq.api.coalescing import RequestCoalescer
from embedq.api.depth import QueueDepth
from embedq.api.metrics import ApiMetrics
from embedq.config import Settings
from embedq.encoders.catalog import ServedModel
from embedq.encoders.tokens import TokenCounter, load_token_counter
from embedq.errors import Unavailable
from embedq.service import EmbeddingService


@dataclass
class ApiState:
    settings: Settings
    service: EmbeddingService
    tokens: TokenCounter
    batcher: RequestCoalescer
    depth: QueueDepth
    metrics: ApiMetrics
    # Each other served model's tokenizer, loaded on its first request.
    other_tokens: dict[str, TokenCounter] = field(default_factory=dict)

    def tokens_of(self, served: ServedModel) -> TokenCounter:
        """The token counter of a served model (`tokens` is the first listed model's)."""
        if served.name == next(iter(self.service.catalog.models)):
            return self.tokens
        if served.name not in self.other_tokens:
            self.other_tokens[served.name] = load_token_counter(served.settings)
        return self.other_tokens[served.name]


def get_state(request: Request) -> ApiState:
    state: ApiState | None = getattr(request.app.state, "embedq", None)
    if state is None:
        raise Unavailable("the server is still starting; retry in a moment", retry_after_s=1)
    return state


def get_service(request: Request) -> EmbeddingService:
    """The process's EmbeddingService (a FastAPI dependency for any router)."""
    return get_state(request).service


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings
