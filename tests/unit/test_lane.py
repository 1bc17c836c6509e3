"""The embedding routes' lane (embedq/api/lane.py) answers exactly as the framework's
routing did: the same requests, sent to the app as built and to the same app with the lane
taken out, get the same statuses, bodies, headers and request metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi import APIRouter, Depends, Request, Response
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.testclient import TestClient

from embedq.api.app import create_app
from embedq.api.lane import Lane, lane_routes
from embedq.config import Settings
from embedq.models import Database
from embedq.models.migrate import upgrade
from embedq.tenants.keys import KeyStore

# Headers that differ between any two responses, whatever served them.
VARYING = {"date", "x-request-id"}


def _requests(embed: str, jobs: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(method, path, httpx options): the lane's routes right and wrong, and neighbours
    it must leave to the router."""
    key = {"Authorization": f"Bearer {embed}"}
    other = {"Authorization": f"Bearer {jobs}"}
    post = "POST"
    return [
        (post, "/v1/embeddings", {"json": {"input": "a text"}, "headers": key}),
        (post, "/v1/embeddings", {"json": {"input": ["one", "two", "one"],
                                           "encoding_format": "base64", "dimensions": 64},
                                  "headers": key}),
        (post, "/v1/embeddings", {"json": {"input": "a text"}}),
        (post, "/v1/embeddings", {"json": {"input": "a text"}, "headers": other}),
        (post, "/v1/embeddings", {"json": {"input": ""}, "headers": key}),
        (post, "/v1/embeddings", {"json": {"input": "x", "model": "nope"}, "headers": key}),
        (post, "/v1/embeddings", {"json": {"input": "x", "dimensions": 4096}, "headers": key}),
        (post, "/v1/embeddings", {"content": b"{not json", "headers": {
            **key, "Content-Type": "application/json"}}),
        (post, "/v1/embeddings", {"content": b"input=x", "headers": {
            **key, "Content-Type": "text/plain"}}),
        (post, "/v1/embeddings", {"content": b"x" * 5000, "headers": {
            **key, "Content-Type": "application/json"}}),
        (post, "/embed", {"json": {"inputs": "a text"}, "headers": key}),
        (post, "/embed", {"json": {"inputs": []}, "headers": key}),
        (post, "/embed", {"json": {"inputs": "a text"}, "headers": other}),
        (post, "/", {"json": {"inputs": ["a", "b"]}, "headers": key}),
        (post, "/", {"json": {"inputs": "a"}}),
        ("GET", "/v1/embeddings", {"headers": key}),
        (post, "/v1/embeddings/", {"json": {"input": "a text"}, "headers": key}),
        ("GET", "/", {"headers": key}),
    ]


def _answers(settings: Settings, keys: tuple[str, str], lane: bool) -> list[Any]:
    app = create_app(settings)
    if not lane:
        app.user_middleware = [m for m in app.user_middleware if m.cls is not Lane]
    out: list[Any] = []
    with TestClient(app) as client:
        for method, path, options in _requests(*keys):
            got = client.request(method, path, **options)
            headers = {k: v for k, v in got.headers.items() if k not in VARYING}
            out.append((method, path, got.status_code, got.content, headers))
        metrics = client.get("/metrics", headers={"Authorization": f"Bearer {keys[0]}"})
        out.append(sorted(line for line in metrics.text.splitlines()
                          if line.startswith("embedq_http_requests_total")))
    return out


def test_the_lane_answers_as_the_router_did(tmp_path: Path) -> None:
    settings = Settings.from_env({"EMBEDQ_ENCODER": "hashing", "EMBEDQ_MAX_BODY_BYTES": "4096",
                                  "EMBEDQ_DATA_DIR": str(tmp_path)})
    upgrade(settings.resolved_database_url)
    db = Database(settings.resolved_database_url)
    try:
        store = KeyStore(db)
        keys = (store.create("alice", "all", "embed,admin").key,
                store.create("alice", "jobs-only", "jobs").key)
    finally:
        db.dispose()
    with_lane = _answers(settings, keys, lane=True)
    without = _answers(settings, keys, lane=False)
    statuses = [answer[2] for answer in with_lane[:-1]]
    # Each kind of answer is in the battery: served, refused by each middleware and route.
    assert {200, 401, 403, 404, 405, 413, 415}.issubset(statuses), statuses
    assert any(s in (400, 422) for s in statuses), statuses
    for got, expected in zip(with_lane, without, strict=True):
        assert got == expected
    assert any('route="/v1/embeddings"' in line for line in with_lane[-1])


def test_the_lane_is_innermost_and_serves_the_embedding_routes(tmp_path: Path) -> None:
    settings = Settings.from_env({"EMBEDQ_ENCODER": "hashing", "EMBEDQ_DATA_DIR": str(tmp_path)})
    app = create_app(settings)
    stack: Any = app.build_middleware_stack()
    while not isinstance(stack, Lane):
        stack = stack.app
    assert isinstance(stack.app, ExceptionMiddleware)  # every middleware of ours is outside
    assert set(stack.routes) == {("POST", "/v1/embeddings"), ("POST", "/embed"), ("POST", "/")}


def test_a_route_with_parameters_to_solve_is_refused() -> None:
    async def _key() -> None:
        return None

    router = APIRouter()

    @router.post("/a")
    async def a(request: Request, n: int = 1) -> Response:
        return Response()

    with pytest.raises(TypeError, match="/a: the lane calls an async handler"):
        lane_routes(router)
    depends = APIRouter(dependencies=[Depends(_key)])

    @depends.post("/b")
    async def b(request: Request) -> Response:
        return Response()

    with pytest.raises(TypeError, match="/b"):
        lane_routes(depends)
    sync = APIRouter()

    @sync.post("/c")
    def c(request: Request) -> Response:
        return Response()

    with pytest.raises(TypeError, match="/c"):
        lane_routes(sync)
    plain = APIRouter()

    @plain.post("/d")
    async def d(request: Request) -> Response:
        return Response()

    assert set(lane_routes(plain)) == {("POST", "/d")}
