"""The MCP server: embedq's tools for agents, built on the official `mcp` SDK.

Tools: embed_text, embed_texts, semantic_cache_lookup, semantic_cache_store,
semantic_cache_feedback, job_status.
Embedding tools share one AsyncPipeline (in-process single flight, then the cross-process
claim); semantic-cache lookups embed their query through the same service, so a repeated
question costs no model call. Anticipated failures come back as tool errors with a
message that says what to do; they are not server crashes.

Every tool acts for a Principal: over HTTP the caller of the request (`embedq mcp`
checks its Bearer key in front of the transport and puts it on the request), over stdio
`local` (the user who started the process). A tool needs the scope its HTTP route needs
(embed, cache:read, cache:write, jobs); another tenant's job or namespace is "not found".
Over HTTP the transport sits behind the API's middleware (`embedq mcp`): the key's
request rate, one audit line a request with the texts a tool took as its `inputs`, and
the key's texts a day for the embedding tools (`quota`), as on the HTTP API.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from embedq import wire
from embedq.errors import EmbedqError
from embedq.limits import check_texts
from embedq.mcp.pipeline import AsyncPipeline
from embedq.service import EmbeddingService
from embedq.tenants import SCOPES, Principal
from embedq.tenants.quota import TextQuota


def caller(ctx: Context[Any, Any], local: Principal, scope: str) -> Principal:
    """Who calls this tool, holding `scope`; a ToolError otherwise."""
    request = ctx.request_context.request
    if request is None:
        principal: Principal | None = local  # stdio: no HTTP request, the local user
    else:
        principal = getattr(request, "scope", {}).get("state", {}).get("principal")
    if principal is None:  # an HTTP transport behind no key check: fail closed
        raise ToolError("this MCP server needs a key: send `Authorization: Bearer <key>`")
    if not principal.allows(scope):
        raise ToolError(f"the key {principal.key_name!r} of tenant {principal.tenant!r} "
                        f"lacks the scope {scope!r} ({SCOPES[scope]}): use a key with it")
    return principal


def count_inputs(ctx: Context[Any, Any], texts: int) -> None:
    """Put how many texts this call takes on its HTTP request, for the audit line the
    middleware writes when the request ends (over stdio there is no request and no line)."""
    request = ctx.request_context.request
    if request is not None:
        getattr(request, "scope", {}).setdefault("state", {})["inputs"] = texts


def create_server(service: EmbeddingService, local: Principal | None = None,
                  quota: TextQuota | None = None) -> MCPServer:
    """The server; `local` is who stdio callers act as (default: tenant "default", every
    scope); `quota` counts the embedding tools' texts against each key's texts a day."""
    local = local or Principal.everything("local")
    pipeline = AsyncPipeline(service)
    server: MCPServer = MCPServer(
        name="embedq",
        instructions=(
            "Embeddings that are never computed twice, and a semantic cache of answers "
            "keyed by meaning. Look up the semantic cache before expensive work; store "
            "results afterwards."
        ),
    )
    backends = _Backends(service, local, quota, pipeline)
    _add_embedding_tools(server, backends)
    _add_cache_tools(server, backends)
    _add_job_tools(server, backends)
    server.embedq_pipeline = pipeline  # type: ignore[attr-defined]
    return server


class _Backends:
    """What the tools call, shared by all of them: the embedding pipeline, and the
    semantic cache and the job service, each made on first use."""

    def __init__(self, service: EmbeddingService, local: Principal, quota: TextQuota | None,
                 pipeline: AsyncPipeline) -> None:
        self.service = service
        self.local = local
        self.quota = quota
        self.pipeline = pipeline
        self._state: dict[str, Any] = {}

    def semantic(self) -> Any:
        if "semantic" not in self._state:
            from embedq.semantic import SemanticCache

            self._state["semantic"] = SemanticCache(self.service)
        return self._state["semantic"]

    def jobs(self) -> Any:
        if "jobs" not in self._state:
            from embedq.jobs.service import JobService

            self._state["jobs"] = JobService(self.service)
        return self._state["jobs"]

    def caller(self, ctx: Context[Any, Any], scope: str) -> Principal:
        return caller(ctx, self.local, scope)

    async def embed(self, ctx: Context[Any, Any], texts: str | list[str], model: str | None,
                    param: str) -> list[list[float]]:
        """The embedding tools' vectors for `texts` (the tool's parameter `param`), within
        the limits, the caller's scope and its texts a day; ToolError otherwise."""
        principal = self.caller(ctx, "embed")
        try:
            # The limits of POST /v1/embeddings (embedq.limits: one table, every way in).
            texts = check_texts(texts, self.service.settings, param)
        except EmbedqError as exc:
            raise ToolError(str(exc)) from exc
        count_inputs(ctx, len(texts))
        try:
            if self.quota is not None and principal.texts_per_day is not None:
                await asyncio.to_thread(self.quota.charge, principal, len(texts))
            outcomes = await self.pipeline.embed(texts, model, principal.tenant)
        except EmbedqError as exc:
            raise ToolError(str(exc)) from exc
        errors = [f"text {i}: {o}" for i, o in enumerate(outcomes)
                  if isinstance(o, BaseException)]
        if errors:
            raise ToolError("; ".join(errors))
        return [wire.floats(o) for o in outcomes if not isinstance(o, BaseException)]


def _add_embedding_tools(server: MCPServer, backends: _Backends) -> None:
    """embed_text and embed_texts (scope embed)."""

    @server.tool()
    async def embed_text(ctx: Context[Any, Any], text: str, model: str | None = None
                         ) -> dict[str, Any]:
        """Embed one text; returns its vector (float32 values as JSON numbers)."""
        vector = (await backends.embed(ctx, text, model, "text"))[0]
        return {"model": model or backends.service.catalog.default.name,
                "dimensions": len(vector), "embedding": vector}

    @server.tool()
    async def embed_texts(ctx: Context[Any, Any], texts: list[str], model: str | None = None
                          ) -> dict[str, Any]:
        """Embed several texts; vectors come back in input order."""
        vectors = await backends.embed(ctx, texts, model, "texts")
        return {"model": model or backends.service.catalog.default.name,
                "data": [{"index": i, "embedding": v} for i, v in enumerate(vectors)]}

    @server.tool()
    async def list_models(ctx: Context[Any, Any]) -> dict[str, Any]:
        """The models served here, each with its tiers and revisions: send a name (or an
        alias, or `name:tier`) as `model` to embed_text and embed_texts."""
        backends.caller(ctx, "embed")
        catalog = backends.service.catalog
        return {"default": catalog.default.name, "aliases": catalog.aliases(),
                "models": [{"name": m.name, "model": m.model, "tiers": list(m.tiers),
                            "revisions": m.revisions} for m in catalog.models.values()]}


def _add_cache_tools(server: MCPServer, backends: _Backends) -> None:
    """semantic_cache_lookup, semantic_cache_store and semantic_cache_feedback (scopes
    cache:read and cache:write)."""

    @server.tool()
    async def semantic_cache_lookup(ctx: Context[Any, Any], namespace: str, query: str,
                                    threshold: float | None = None) -> dict[str, Any]:
        """Find a stored payload whose query means the same (cosine score in [-1, 1])."""
        tenant = backends.caller(ctx, "cache:read").tenant
        count_inputs(ctx, 1)
        try:
            await asyncio.to_thread(backends.semantic().check_owner, namespace, tenant)
            result = await asyncio.to_thread(backends.semantic().lookup, namespace, query,
                                             threshold=threshold, tenant=tenant)
        except EmbedqError as exc:
            raise ToolError(str(exc)) from exc
        out: dict[str, Any] = result.to_json()
        return out

    @server.tool()
    async def semantic_cache_store(ctx: Context[Any, Any], namespace: str, query: str,
                                   payload: Any, ttl_s: int | None = None) -> dict[str, Any]:
        """Store a payload (any JSON) under a query; returns the entry id."""
        tenant = backends.caller(ctx, "cache:write").tenant
        count_inputs(ctx, 1)
        try:
            entry_id = await asyncio.to_thread(backends.semantic().put, namespace, query,
                                               payload, ttl_s=ttl_s, tenant=tenant)
        except EmbedqError as exc:
            raise ToolError(str(exc)) from exc
        return {"id": entry_id, "namespace": namespace}

    @server.tool()
    async def semantic_cache_feedback(ctx: Context[Any, Any], namespace: str, hit_id: str,
                                      correct: bool) -> dict[str, Any]:
        """Say whether a payload semantic_cache_lookup served was right (its match's
        hit_id). A wrong one stops that entry answering queries like this one, and may
        raise the namespace's threshold to keep its error budget."""
        tenant = backends.caller(ctx, "cache:read").tenant
        try:
            await asyncio.to_thread(backends.semantic().check_owner, namespace, tenant)
            out: dict[str, Any] = await asyncio.to_thread(
                backends.semantic().give_feedback, namespace, hit_id, correct, tenant)
        except EmbedqError as exc:
            raise ToolError(str(exc)) from exc
        return out


def _add_job_tools(server: MCPServer, backends: _Backends) -> None:
    """job_status (scope jobs)."""

    @server.tool()
    async def job_status(ctx: Context[Any, Any], job_id: str) -> dict[str, Any]:
        """Status and progress of an embedding job (see POST /v1/jobs, `embedq bulk`).

        status: queued, running, succeeded, succeeded_with_errors (progress.failed items
        have no vector), failed (every item failed) or cancelled."""
        tenant = backends.caller(ctx, "jobs").tenant
        try:
            described: dict[str, Any] = await asyncio.to_thread(backends.jobs().describe,
                                                                job_id, tenant)
        except EmbedqError as exc:
            raise ToolError(str(exc)) from exc
        return described
