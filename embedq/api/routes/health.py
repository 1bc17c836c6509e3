"""GET /healthz (the process is alive) and GET /readyz (it can answer requests).

Ready means: the hot store and the broker answer, the database answers, and at least one
live worker (a heartbeat in the hot store) that consumes the online queue serves this
deployment's model and revision, for each of its tiers (EMBEDQ_TIERS), unless this
process encodes its online misses itself (EMBEDQ_ONLINE_ENCODE=local).
Not ready is 503 with Retry-After. Neither route needs an API key: orchestrators probe
them without one. The checks (what is down, how many workers) are shown to callers whose
key has the `admin` scope (and on an open API); anyone else learns ready or not ready.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text
from starlette.concurrency import run_in_threadpool

from embedq.api.auth import principal_of
from embedq.api.errors import error_response
from embedq.api.state import ApiState, get_state
from embedq.coordination.store import consumes, served_revisions
from embedq.encoders.catalog import ServedModel
from embedq.errors import EmbedqError

router = APIRouter(tags=["health"])

READY_RETRY_AFTER_S = 5


@router.get("/healthz", summary="The process is alive")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="Broker, database and a worker are reachable",
            responses={503: {"description": "not ready; the message names what is down"}})
async def readyz(request: Request) -> JSONResponse:
    state = getattr(request.app.state, "embedq", None)
    if state is None:
        checks, failed = {"startup": "the server is still starting"}, ["startup"]
    else:
        checks, failed = await run_in_threadpool(readiness, get_state(request))
    if not sees_checks(request):
        if not failed:
            return JSONResponse({"status": "ready"})
        return error_response(
            503, "not ready; retry after the Retry-After seconds (a key with the admin "
            "scope sees which check failed)", "service_unavailable", "not_ready",
            headers={"Retry-After": str(READY_RETRY_AFTER_S)}, extra={"status": "unavailable"})
    if not failed:
        return JSONResponse({"status": "ready", "checks": checks})
    reasons = "; ".join(f"{name}: {checks[name]}" for name in failed)
    return error_response(
        503, f"not ready ({reasons}); retry after the Retry-After seconds",
        "service_unavailable", "not_ready",
        headers={"Retry-After": str(READY_RETRY_AFTER_S)},
        extra={"status": "unavailable", "checks": checks},
    )


def sees_checks(request: Request) -> bool:
    """Whether the caller may see what each readiness check found (scope admin)."""
    principal = principal_of(request)
    return principal is not None and principal.allows("admin")


def readiness(state: ApiState) -> tuple[dict[str, str], list[str]]:
    """Each check's result ("ok", or what is wrong) and the names of those that failed."""
    service = state.service
    checks: dict[str, str] = {}
    checks["hot_store"] = _check(service.hot.ping)
    checks["broker"] = _check(lambda: state.depth.probe(state.settings.queue.online_queue))
    checks["database"] = _check(lambda: _select_one(state))
    failed = [name for name, detail in checks.items() if detail != "ok"]
    try:
        workers = service.hot.live_workers()
    except EmbedqError as exc:
        checks["workers"] = f"cannot list workers: {exc}"
        return checks, [*failed, "workers"]
    served = list(service.catalog.models.values())
    found = [_workers_for(m, workers, several=service.catalog.several) for m in served]
    serving = sum(n for n, _ in found)
    missing = [problem for _, problem in found if problem]
    if workers and not missing:
        checks["workers"] = f"{serving} live"
        return checks, failed
    if service.settings.queue.online_encode == "local":
        # Online misses are encoded here; only jobs (and queueing API processes) need one.
        checks["workers"] = (f"{serving} live; online misses are encoded in this "
                             "process (EMBEDQ_ONLINE_ENCODE=local), jobs wait for a worker")
        return checks, failed
    checks["workers"] = "; ".join(missing) if workers else \
        "no live worker: start `embedq worker`"
    return checks, [*failed, "workers"]


def _workers_for(served: ServedModel, workers: dict[str, dict[str, Any]], *,
                 several: bool) -> tuple[int, str]:
    """(live workers serving `served` on its online queue, what is missing or "").

    A worker that says which queues it consumes serves requests only if the model's
    online queue is one of them (one started with `--queues bulk` does not)."""
    online = served.online_queue  # the queue its misses go to (embedded: its own)
    serving = [w for w in workers.values() if w.get("model") == served.model
               and consumes(w, online)]
    unserved = [f"{tier} ({served.model}@{revision})"
                for tier, revision in served.revisions.items()
                if not any(revision in served_revisions(w) for w in serving)]
    start = f"`embedq worker --model {served.name}`" if several else "`embedq worker`"
    if not unserved:
        return len(serving), ""
    if not serving:
        return 0, (
            f"{len(workers)} live workers, none consuming the online queue {online!r} for "
            f"{served.model}: start {start} (its --queues, when given, must "
            "include the online queue) with the same EMBEDQ_MODEL and EMBEDQ_TIERS")
    return len(serving), (
        f"{len(workers)} live workers, none serving tier {', '.join(unserved)}: start a "
        "worker with the same EMBEDQ_MODEL, revision and EMBEDQ_TIERS")


def _check(probe: Any) -> str:
    try:
        probe()
    except EmbedqError as exc:
        return str(exc)
    return "ok"


def _select_one(state: ApiState) -> None:
    with state.service.db.session() as s:
        s.execute(text("SELECT 1"))
