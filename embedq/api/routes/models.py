"""GET /v1/models: the models this deployment serves, with width and window: one entry
per served precision tier (`all-MiniLM-L6-v2` for the default, `all-MiniLM-L6-v2:int8`).

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
from embedq.encoders import model_created
from embedq.errors import InvalidInput, NotFound

router = APIRouter(tags=["models"])

_STARTED_S = int(time.time())


@router.get("/v1/models", response_model=ModelList, responses=error_responses(401),
            summary="The models served here")
async def list_models(request: Request) -> ModelList:
    state = get_state(request)
    return ModelList(data=[await _card(state, tier) for tier in state.settings.model.tiers])


@router.get("/v1/models/{model_id:path}", response_model=ModelCard,
            responses=error_responses(401, 404), summary="One served model")
async def get_model(request: Request, model_id: str) -> ModelCard:
    state = get_state(request)
    try:
        tier = state.service.tier_of(model_id)
    except InvalidInput as exc:
        raise NotFound(f"{exc}; GET /v1/models lists the served models") from exc
    return await _card(state, tier)


async def _card(state: ApiState, tier: str) -> ModelCard:
    dimension, window = state.tokens.dimension, state.tokens.window
    if dimension is None or window is None:
        # An upstream encoder's facts are known only to the workers that call it.
        workers = await run_in_threadpool(state.service.hot.live_workers)
        for info in workers.values():
            if info.get("model") == state.service.model:
                dimension = dimension or _int(info.get("dimension"))
                window = window or _int(info.get("max_seq_length"))
    return ModelCard(
        id=state.service.model_name(tier),
        created=model_created(state.settings) or _STARTED_S,
        revision=state.service.revisions[tier],
        dimension=state.settings.model.dimensions or dimension,
        max_seq_length=window,
        truncate=state.settings.model.truncate,
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) else None
