"""The embedding routes' own lane: their requests go straight to their handlers.

POST /v1/embeddings and TEI's POST /embed and POST / are most of what the API serves, one
short request after another. Under 50 one-text clients, FastAPI's and Starlette's part of
each such request (matching the routers, the exception and exit-stack middlewares, the
request handler with its dependency solving) cost serve about a third of its CPU a hit
(docs/history.md, "The embedding routes' own lane"). `Lane` is the innermost of the app's
middlewares: every middleware (metrics, CORS, the key check, the body limit) applies to
these requests as before, and anything but their exact method and path goes on to the
router, answered as before.

What a lane route may be is checked when the lane is built (`lane_routes`): a route whose
handler takes the request alone (no parameter, dependency or body for FastAPI to solve)
and checks its caller's scope itself (`auth.check_scope`). Its embedq errors are answered
in its route's shape (`render`), as the app's handlers (errors.py) and TEI's route class
answer them. These handlers raise no other error that the app answers with a 4xx, so any
other exception goes on to the server-error handler (500), as from the router. The routes
stay registered with FastAPI: the OpenAPI document, and a request the lane does not take
(another method, a trailing slash), are unchanged.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass

from fastapi import APIRouter
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from embedq.api.errors import ErrorRenderer, embedq_error_response
from embedq.errors import EmbedqError


@dataclass(frozen=True)
class LaneRoute:
    """A route the lane serves, and how its embedq errors are answered."""

    route: APIRoute
    render: ErrorRenderer


def lane_routes(router: APIRouter) -> dict[tuple[str, str], LaneRoute]:
    """(method, path) -> each route of `router`, whose embedq errors are answered as its
    route class says (`render`, as TEI's does), else in the app's OpenAI shape. Raises
    TypeError for a route the lane cannot serve as FastAPI would: one that is not async,
    or has anything for FastAPI to solve but the request."""
    served: dict[tuple[str, str], LaneRoute] = {}
    for route in router.routes:
        if not isinstance(route, APIRoute):
            raise TypeError(f"{route!r} is not an APIRoute: the lane serves API routes only")
        needs = route.dependant
        solved = (needs.path_params or needs.query_params or needs.header_params
                  or needs.cookie_params or needs.body_params or needs.dependencies)
        if solved or needs.request_param_name is None \
                or not inspect.iscoroutinefunction(route.endpoint):
            raise TypeError(
                f"{route.path}: the lane calls an async handler with the request alone; "
                "this one needs FastAPI to solve its parameters: leave it to the router")
        for method in route.methods or ():
            served[(method, route.path)] = LaneRoute(
                route, getattr(route, "render", embedq_error_response))
    return served


class Lane:
    """Serves `routes` without the framework's routing; passes every other request on."""

    def __init__(self, app: ASGIApp, routes: Mapping[tuple[str, str], LaneRoute]) -> None:
        self.app = app
        self.routes = dict(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        lane = None
        if scope["type"] == "http" and not scope.get("root_path"):
            lane = self.routes.get((scope["method"], scope["path"]))
        if lane is None:
            await self.app(scope, receive, send)
            return
        # What the router would have put there (the metrics count by the route's path).
        scope["route"] = lane.route
        scope["endpoint"] = lane.route.endpoint
        scope["path_params"] = {}
        try:
            response = await lane.route.endpoint(Request(scope, receive, send))
        except EmbedqError as exc:
            response = lane.render(exc)
        await response(scope, receive, send)
