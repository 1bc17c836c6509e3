"""GET /v1/models: the models this deployment serves, with width and window: one entry
per served model and precision tier (`all-MiniLM-L6-v2` for a model's default tier,
`all-MiniLM-L6-v2:int8`), the default model first; a model's aliases on its default
tier's entry. GET /v1/models/{id} also takes an alias.

`created` is when the model's files were written (`embedq.encoders.model_created`: for a
local model folder, the newest modification time of the files its revision hashes), or,
for a model without local files (a remote API, the test encoders), when this API process
started.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from embedq.api.errors import error_responses
from embedq.api.schemas import ModelCard, ModelList
from embedq.api.state import ApiState, get_state
from embedq.config.catalog import DEFAULT_ALIAS
from embedq.encoders import model_created
from embedq.encoders.catalog import ServedModel
from embedq.errors import InvalidInput, NotFound

router = APIRouter(tags=["models"])

_STARTED_S = int(time.time())


@router.get("/v1/models", response_model=ModelList, responses=error_responses(401),
            summary="The models served here")
async def list_models(request: Request) -> ModelList:
    state = get_state(request)
    models = state.service.catalog.models.values()
    return ModelList(data=[await _card(state, m, tier) for m in models for tier in m.tiers])


@router.get("/v1/models/{model_id:path}", response_model=ModelCard,
            responses=error_responses(401, 404), summary="One served model")
async def get_model(request: Request, model_id: str) -> ModelCard:
    state = get_state(request)
    try:
        served, tier = state.service.resolve(model_id)
    except InvalidInput as exc:
        raise NotFound(f"{exc}; GET /v1/models lists the served models") from exc
    return await _card(state, served, tier)


async def _card(state: ApiState, served: ServedModel, tier: str) -> ModelCard:
    tokens = state.tokens_of(served)
    dimension, window = tokens.dimension, tokens.window
    if dimension is None or window is None:
        # An upstream encoder's facts are known only to the workers that call it.
        workers = await run_in_threadpool(state.service.hot.live_workers)
        for info in workers.values():
            if info.get("model") == served.model:
                dimension = dimension or _int(info.get("dimension"))
                window = window or _int(info.get("max_seq_length"))
    catalog = state.service.catalog
    aliases = [a for a, name in catalog.aliases().items() if name == served.name
               and (catalog.several or a != DEFAULT_ALIAS)] if tier == served.default_tier \
        else []
    return ModelCard(
        id=served.label(tier),
        created=model_created(served.settings) or _STARTED_S,
        revision=served.revisions[tier],
        dimension=state.settings.model.dimensions or dimension,
        max_seq_length=window,
        truncate=state.settings.model.truncate,
        aliases=aliases,
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) else None
