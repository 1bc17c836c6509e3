"""/v1/semantic-cache: put, look up, delete and count (query, payload) entries by meaning.

    PUT    /v1/semantic-cache/{namespace}               {"query", "payload", "ttl_s"?,
                                                         "sliding"?, "metadata"?} -> {"id"}
    POST   /v1/semantic-cache/{namespace}/lookup        {"query", "threshold"?, "k"?,
                                                         "filter"?, "explain"?}
                                                        -> {"hit", "matches", "truncated",
                                                            "considered" (with explain)}
    DELETE /v1/semantic-cache/{namespace}/{entry_id}    one entry (404 if absent)
    DELETE /v1/semantic-cache/{namespace}               the whole namespace
    GET    /v1/semantic-cache/{namespace}/stats         entries, hits, misses, index, sync,
                                                        the threshold it runs at, feedback,
                                                        served hits by verdict (unverified)
    PUT    /v1/semantic-cache/{namespace}/config        {"max_false_hit_rate"?, "threshold"?}
                                                        creates the namespace if new
    POST   /v1/semantic-cache/{namespace}/feedback      {"id": hit_id, "correct": bool}

The process's SemanticCache is built in this router's lifespan (merged into the app's),
so its indexes are loaded before the first request and its sync thread stops at shutdown.
Bad input raises embedq errors; the app's error table answers them (4xx, OpenAI shape).
A namespace belongs to the tenant whose key first put into it: lookups and stats need the
scope cache:read, puts and deletes cache:write, and another tenant's namespace answers
404 on every route, as one that does not exist.
Handlers are plain functions: FastAPI runs them on its thread pool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Path, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from embedq.api.auth import ANY_KEY, CacheReader, CacheWriter
from embedq.errors import Unavailable
from embedq.semantic import SemanticCache
from embedq.semantic.service import MAX_K, MAX_TTL_S


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    cache = await run_in_threadpool(SemanticCache, app.state.service)
    app.state.semantic = cache
    try:
        yield
    finally:
        await run_in_threadpool(cache.close)


router = APIRouter(prefix="/v1/semantic-cache", tags=["semantic cache"], lifespan=lifespan,
                   dependencies=[Depends(ANY_KEY)])


def semantic_cache(request: Request) -> SemanticCache:
    cache: SemanticCache | None = getattr(request.app.state, "semantic", None)
    if cache is None:
        raise Unavailable("the semantic cache is still loading; retry in a moment", 1)
    return cache


Cache = Annotated[SemanticCache, Depends(semantic_cache)]


class PutRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(description="the question or text the payload answers")
    payload: Any = Field(description="any JSON: an LLM reply, a tool result, a context")
    # Bounds are documented here and enforced by the service, whose messages say what to do.
    ttl_s: int | None = Field(default=None, description="seconds to live; none = no expiry",
                              json_schema_extra={"minimum": 1, "maximum": MAX_TTL_S})
    sliding: bool | None = Field(default=None, description="each hit restarts the ttl")
    metadata: dict[str, Any] | None = None


class LookupRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str
    threshold: float | None = Field(
        default=None, description="cosine in [-1, 1]; 1.0 = exact text only; none = default")
    k: int = Field(default=1, description="matches to return, best first",
                   json_schema_extra={"minimum": 1, "maximum": MAX_K})
    filter: dict[str, Any] | None = Field(default=None, description="metadata to match")
    explain: bool = Field(default=False, description=(
        "also list every candidate considered: its score, why it was refused "
        "(below_threshold, guard, verifier, filter, expired, beyond_k) and the checks it "
        "passed (checks: threshold, guard, each verifier slot...)"))


class ConfigRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_false_hit_rate: float | None = Field(default=None, description=(
        "error budget: the largest share of served hits that may be wrong, in [0, 1); "
        "feedback raises the namespace's threshold to keep it; none = no budget"),
        json_schema_extra={"minimum": 0, "exclusiveMaximum": 1})
    threshold: float | None = Field(
        default=None, description="the namespace's base threshold; none = the default")
    trust_score: float | None = Field(default=None, description=(
        "under a budget: the score from which a candidate the verifier refuses only on a "
        "slot the model judges (content, disjoint) is served; feedback on those hits raises "
        "it to keep the budget; none = never served"))


class FeedbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Strict: `"correct": "no"` or an id sent as a number is a 422, not a guess.
    id: str = Field(strict=True, description="the hit_id of a match a lookup returned")
    correct: bool = Field(strict=True, description="was the served payload right?")


@router.put("/{namespace}", summary="Store a (query, payload) entry")
def put_entry(namespace: str, body: PutRequest, cache: Cache, caller: CacheWriter,
              request: Request) -> dict[str, Any]:
    request.state.inputs = 1  # for the audit line (auth.py)
    entry_id = cache.put(namespace, body.query, body.payload, ttl_s=body.ttl_s,
                         sliding=body.sliding, metadata=body.metadata, tenant=caller.tenant)
    return {"id": entry_id, "namespace": namespace}


@router.post("/{namespace}/lookup", summary="Find entries whose query means the same")
def lookup(namespace: str, body: LookupRequest, cache: Cache, caller: CacheReader,
           request: Request) -> dict[str, Any]:
    request.state.inputs = 1  # for the audit line (auth.py)
    cache.check_owner(namespace, caller.tenant)
    result = cache.lookup(namespace, body.query, threshold=body.threshold, k=body.k,
                          filter=body.filter, explain=body.explain, tenant=caller.tenant)
    return result.to_json()


@router.put("/{namespace}/config", summary="Set a namespace's threshold and error budget")
def configure(namespace: str, body: ConfigRequest, cache: Cache, caller: CacheWriter
              ) -> dict[str, Any]:
    return cache.configure(namespace, max_false_hit_rate=body.max_false_hit_rate,
                           threshold=body.threshold, trust_score=body.trust_score,
                           tenant=caller.tenant)


@router.post("/{namespace}/feedback", summary="Say whether a served hit was right")
def feedback(namespace: str, body: FeedbackRequest, cache: Cache, caller: CacheReader
             ) -> dict[str, Any]:
    # cache:read is enough: whoever was served a hit (its unguessable hit_id) may judge it.
    cache.check_owner(namespace, caller.tenant)
    return cache.give_feedback(namespace, body.id, body.correct, caller.tenant)


@router.delete("/{namespace}/{entry_id}", summary="Delete one entry")
def delete_entry(namespace: str, entry_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
                 cache: Cache, caller: CacheWriter) -> dict[str, Any]:
    cache.delete(namespace, entry_id, caller.tenant)
    return {"id": entry_id, "deleted": True}


@router.delete("/{namespace}", summary="Delete a whole namespace")
def drop_namespace(namespace: str, cache: Cache, caller: CacheWriter) -> dict[str, Any]:
    return {"namespace": namespace, "deleted": cache.drop(namespace, caller.tenant)}


@router.get("/{namespace}/stats", summary="Entries, hits, misses, index kind, last sync")
def stats(namespace: str, cache: Cache, caller: CacheReader) -> dict[str, Any]:
    cache.check_owner(namespace, caller.tenant)
    return cache.stats(namespace)
