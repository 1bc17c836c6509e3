"""The FastAPI app: `create_app(settings)`; `embedq serve` runs it under uvicorn.

Routes: POST /v1/embeddings, GET /v1/models, GET /healthz, GET /readyz, GET /metrics,
GET /, GET /ping, GET /openapi.json, GET /docs (routes/public.py),
text-embeddings-inference's (routes/tei.py), plus the feature routers of FEATURE_ROUTERS.
Every route but the probes (/healthz, /readyz, /health) and the public reads of
routes/public.py needs an API key once keys exist (auth.py: checked before the body is
read; each router states the scope its routes need); every error is answered in the
OpenAI error shape (errors.py; the TEI routes in TEI's); every request body is limited
while it streams in (limits.py). Feature routers get all three without doing anything.
Browsers of the origins in EMBEDQ_CORS_ORIGINS may call it (CORS; none by default).
The embedding routes' requests reach their handlers past the framework's routing, inside
all of the above (lane.py).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import APIRouter, Depends, FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.concurrency import run_in_threadpool

from embedq.api.auth import ADMIN, ANY_KEY, EMBED, AuthMiddleware
from embedq.api.coalescing import RequestCoalescer
from embedq.api.cors import OriginsCORS
from embedq.api.depth import QueueDepth
from embedq.api.errors import error_responses, install_handlers
from embedq.api.lane import Lane, LaneRoute, lane_routes
from embedq.api.limits import BodyLimitMiddleware
from embedq.api.metrics import ApiMetrics, ClusterCollector, MetricsMiddleware
from embedq.api.routes import embeddings, health, models, public, tei
from embedq.api.routes.tei_errors import tei_error_response
from embedq.api.state import ApiState, get_state
from embedq.config import Settings
from embedq.deployment import Deployment
from embedq.encoders.tokens import TokenCounter, load_token_counter
from embedq.heap import settle
from embedq.tenants import Authenticator, KeyStore
from embedq.tenants.quota import TextQuota
from embedq.tenants.ratelimit import RateLimiter
from embedq.version import __version__

log = logging.getLogger("embedq.api")

# Routers of other features: each module exposes `router: fastapi.APIRouter`.
FEATURE_ROUTERS = (
    "embedq.api.routes.jobs",  # async and bulk jobs
    "embedq.api.routes.semantic",  # the semantic cache
    "embedq.api.routes.batches",  # the OpenAI Batch API: /v1/files, /v1/batches
)


def create_app(settings: Settings | None = None) -> FastAPI:
    """The API for `settings` (default: from the environment); servers start in lifespan."""
    settings = settings or Settings.from_env()
    metrics = ApiMetrics()
    # The first listed model's tokenizer only: fast, and fails early.
    tokens = load_token_counter(settings.for_model(settings.served_models()[0].name))
    app = FastAPI(
        title="embedq",
        version=__version__,
        description=(
            "An embedding service that never computes the same vector twice. "
            "POST /v1/embeddings is OpenAI-compatible."
        ),
        lifespan=_lifespan(settings, metrics, tokens),
        openapi_url=None,  # served by routes/public.py, with Swagger UI's local assets
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    install_handlers(app)
    lane = _include_routers(app, settings, tokens)
    _add_middleware(app, settings, metrics, lane)
    return app


def _lifespan(settings: Settings, metrics: ApiMetrics, tokens: TokenCounter
              ) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's lifespan: the deployment (and, embedded, its worker), the request
    coalescer, the key check and the limits start with the server and close after it."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        deployment = await run_in_threadpool(Deployment.from_settings, settings)
        # Embedded: the worker thread starts with the server, so /readyz (and /health) are
        # ready once it is, not only after the first request.
        await run_in_threadpool(deployment.ensure_worker)
        service = deployment.service
        # The first requests a new replica takes cost what later ones do.
        await run_in_threadpool(service.warm_up)
        batcher = RequestCoalescer(service, wait_ms=settings.api.batch_wait_ms,
                                 max_texts=settings.api.batch_max_texts)
        depth = QueueDepth(deployment.queue_depth, deployment.settings)
        metrics.attach(ClusterCollector(service, depth,
                                        semantic=lambda: getattr(app.state, "semantic", None)))
        batcher.start()
        app.state.service = service
        app.state.deployment = deployment
        app.state.embedq = ApiState(settings, service, tokens, batcher, depth, metrics)
        authenticator = Authenticator(settings.api.keys, KeyStore(service.db))
        app.state.authenticator = authenticator
        app.state.limiter = RateLimiter(getattr(service.hot, "client", None))
        app.state.quota = TextQuota(getattr(service.hot, "client", None))
        if not await run_in_threadpool(authenticator.required):
            log.warning("EMBEDQ_API_KEYS is unset: the API is open to anyone who can reach "
                        "it; set EMBEDQ_API_KEYS=key1,key2 or create keys with `embedq keys "
                        "create` to require Bearer keys")
        log.info("serving model=%s revision=%s window=%s dimension=%s", service.model,
                 service.revision, tokens.window, tokens.dimension)
        # What startup made lives as long as the process: out of the collector's walks.
        settle(settings.worker.gc_gen0)
        try:
            yield
        finally:
            await batcher.close()
            deployment.close()

    return lifespan


def _add_middleware(app: FastAPI, settings: Settings, metrics: ApiMetrics,
                    lane: dict[tuple[str, str], LaneRoute]) -> None:
    """The embedding routes' lane, the body limit, the key check, CORS and the metrics, in
    this order (the last added runs first)."""
    app.add_middleware(Lane, routes=lane)  # innermost: every other middleware applies
    # An upload is a file and its multipart framing: the route checks the file's own size.
    upload_limit = max(settings.api.max_body_bytes, settings.api.max_file_bytes + 64 * 1024)
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=settings.api.max_body_bytes,
                       path_limits={"/v1/files": (upload_limit, "EMBEDQ_MAX_FILE_BYTES")})
    # Outside the body limit: a caller without a key is refused before any body is read.
    app.add_middleware(AuthMiddleware,
                       authenticator=lambda: getattr(app.state, "authenticator", None),
                       limiter=lambda: getattr(app.state, "limiter", None),
                       renderers=dict.fromkeys(tei.PATHS, tei_error_response),
                       public_reads=public.PUBLIC_READS)
    if settings.api.cors_origins:
        # Outside the key check: a browser's preflight carries no key, and a 401 needs
        # the CORS headers for the page to read it.
        app.add_middleware(OriginsCORS, origins=settings.api.cors_origins)
    app.add_middleware(MetricsMiddleware, metrics=metrics)


def _include_routers(app: FastAPI, settings: Settings, tokens: TokenCounter
                     ) -> dict[tuple[str, str], LaneRoute]:
    """Include every router; return the embedding routes, which the lane serves (their
    handlers check their caller's scope: they are included with no dependency, which the
    lane would not run)."""
    # Every route but the probes needs an accepted key; routers add the scope they need.
    protected = [Depends(ANY_KEY)]
    embed = [Depends(EMBED)]
    # The hot routes first: a request the lane does not take is matched in order.
    openai = embeddings.build_router(settings, tokens.dimension)
    app.include_router(openai)
    app.include_router(tei.embed_router)
    app.include_router(health.router)
    app.include_router(public.build_router(app))
    app.include_router(models.router, dependencies=protected)
    app.include_router(tei.router, dependencies=embed)  # text-embeddings-inference
    app.include_router(tei.health_router)
    app.include_router(_meta_router(), dependencies=protected)
    for router in _feature_routers():
        app.include_router(router, dependencies=protected)
    return {**lane_routes(openai), **lane_routes(tei.embed_router)}


def _feature_routers() -> list[APIRouter]:
    return [importlib.import_module(module).router for module in FEATURE_ROUTERS]


def _meta_router() -> APIRouter:
    router = APIRouter()

    @router.get("/metrics", tags=["health"], summary="Prometheus metrics (scope admin)",
                response_class=Response, responses={
                    200: {"content": {CONTENT_TYPE_LATEST.split(";")[0]: {}}},
                    **error_responses(401, 403)},
                dependencies=[Depends(ADMIN)])
    async def metrics(request: Request) -> Response:
        body = await run_in_threadpool(get_state(request).metrics.render)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return router
