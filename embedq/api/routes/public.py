"""What anyone may read without a key: GET / (what this server is), GET /ping, the
OpenAPI document and Swagger UI at /docs, whose script, style sheet and icon are served
from this app (the files of the `fastapi-offline` package), never from a CDN, so the page
works where the server has no internet and leaks no visit to a third party.

The OpenAPI document describes the routes and this deployment's limits, nothing a key
protects; every route it lists still checks the key as before. `PUBLIC_READS` is what the
key check (auth.py) lets through for GET and HEAD.
"""

from __future__ import annotations

import time
from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response

from embedq.api.state import get_state
from embedq.errors import NotFound
from embedq.version import __version__

ASSETS_PATH = "/docs/assets"
# Swagger UI's files as fastapi-offline ships them, with their media types.
ASSETS = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css",
          "favicon.png": "image/png"}
PUBLIC_READS = frozenset({"/", "/ping", "/openapi.json", "/docs",
                          *(f"{ASSETS_PATH}/{name}" for name in ASSETS)})


def assets_folder() -> Path:
    """Where the installed Swagger UI files are."""
    return Path(str(files("fastapi_offline") / "static"))


def build_router(app: FastAPI) -> APIRouter:
    router = APIRouter(tags=["about"])
    folder = assets_folder()

    @router.get("/", summary="What this server is: name, version, the served model, links")
    async def index(request: Request) -> dict[str, Any]:
        service = get_state(request).service
        return {
            "name": "embedq", "version": __version__,
            "model": service.model_name(service.settings.model.tiers[0]),
            "revision": service.revision,
            "links": {"docs": "/docs", "openapi": "/openapi.json", "models": "/v1/models",
                      "embeddings": "/v1/embeddings", "ready": "/readyz"},
        }

    # One route a method: a route serving GET and HEAD gives both one operation id in
    # the OpenAPI schema, which code generators (and FastAPI's own check) refuse.
    @router.get("/ping", summary="200 while the process is up (as /healthz)")
    async def ping() -> dict[str, Any]:
        return {"status": "ok", "unix": time.time()}

    @router.head("/ping", summary="200 while the process is up, without a body")
    async def ping_head() -> Response:
        return Response(status_code=200)

    @router.get("/openapi.json", include_in_schema=False)
    async def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @router.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json", title="embedq API",
            swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_PATH}/favicon.png",
            # Swagger UI would ask validator.swagger.io about the document on each visit.
            swagger_ui_parameters={"validatorUrl": None})

    @router.get(ASSETS_PATH + "/{name}", include_in_schema=False)
    async def asset(name: str) -> FileResponse:
        media_type = ASSETS.get(name)
        if media_type is None:
            raise NotFound(f"no asset {name!r}: /docs loads {', '.join(sorted(ASSETS))}")
        return FileResponse(folder / name, media_type=media_type,
                            headers={"Cache-Control": "public, max-age=86400"})

    return router
