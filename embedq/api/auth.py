"""API keys: `Authorization: Bearer <key>`, checked before a byte of the body is read.

`AuthMiddleware` wraps the app in front of body parsing: a request without an accepted
key is answered 401 without reading its body, so an unauthenticated caller cannot make
the server hold a 16 MB body. An accepted key's `Principal` (tenant, scopes, limits) is
put on the request (`request.state.principal`); routes state the scope they need with
`Depends(require_scope(...))` (403 without it) and act for `principal.tenant`.

Keys are the bootstrap keys of EMBEDQ_API_KEYS (tenant "default", every scope) and the
keys of `embedq keys create` (embedq.tenants). With neither, the API is open: every
caller acts as the tenant "default" with every scope (`embedq serve` refuses to listen
beyond loopback so, unless told --insecure-open). Keyed only closes: a process that has
seen a key requires one until it is restarted, so revoking the last key leaves it
refusing every caller (401, logged: `RefusalLog`), never open to them (the loopback rule
for an open server is checked at start, and stays true). The public paths (probes, and for
reading: the index, /ping, the OpenAPI document and Swagger UI with its assets) need no
key; a valid key there still names its caller, so /readyz shows its checks to admin keys.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from embedq.api.asgi import StatusRecorder
from embedq.api.errors import ErrorRenderer, embedq_error_response
from embedq.errors import EmbedqError, Forbidden, Unauthorized, Unavailable
from embedq.tenants import SCOPES, Authenticator, Principal
from embedq.tenants.authenticator import match_index
from embedq.tenants.quota import TextQuota
from embedq.tenants.ratelimit import RateLimiter

# Documents the scheme in OpenAPI; the check itself is the middleware's.
bearer = HTTPBearer(
    auto_error=False,
    description="A key from `embedq keys create`, or one of EMBEDQ_API_KEYS.",
)

audit_log = logging.getLogger("embedq.audit")

OPEN = Principal.everything("open")
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/health"})
READS = frozenset({"GET", "HEAD"})

NO_KEY = ("this API needs a key: send the header `Authorization: Bearer <key>` with a key "
          "from `embedq keys create` or one of the keys in the server's EMBEDQ_API_KEYS")
BAD_KEY = ("the API key is not accepted (unknown or revoked): use a key from `embedq keys "
           "create` (`embedq keys list` shows the active ones) or one of EMBEDQ_API_KEYS")
NO_ACTIVE_KEY = ("no API key is active on this server (every key is revoked), and a server "
                 "that required keys never turns open: it refuses every request but the "
                 "health probes until a key is created (`embedq keys create`; it is accepted "
                 "within a second) or it is restarted deliberately open")


def bearer_token(scope: Scope) -> str | None:
    """The token of an `Authorization: Bearer` header; None when absent or another scheme."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            token = token.strip()
            return token if scheme.lower() == "bearer" and token else None
    return None


def key_matches(given: str, keys: tuple[str, ...]) -> bool:
    """True if `given` equals one of `keys`; every key is compared, in constant time each."""
    return match_index(given, tuple(k.encode("utf-8") for k in keys)) > 0


class AuthMiddleware:
    """401 before the body for any non-public path without an accepted key."""

    def __init__(self, app: ASGIApp, authenticator: Callable[[], Authenticator | None],
                 public: Collection[str] = PUBLIC_PATHS,
                 renderers: dict[str, ErrorRenderer] | None = None,
                 limiter: Callable[[], RateLimiter | None] = lambda: None,
                 public_reads: Collection[str] = ()) -> None:
        """`authenticator()`: the process's Authenticator (None until the app started);
        `public`: paths open to any method; `public_reads`: paths open to GET and HEAD
        only (`/` is also TEI's POST, which needs a key);
        `renderers`: path -> the error shape of that path (TEI's routes have their own);
        `limiter()`: the per-key request rate limiter (429 before the body is read)."""
        self.app = app
        self.authenticator = authenticator
        self.limiter = limiter
        self.public = frozenset(public)
        self.public_reads = frozenset(public_reads)
        self.renderers = dict(renderers or {})
        self.refusals = RefusalLog()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        public = path in self.public or (
            path in self.public_reads and scope.get("method") in READS)
        try:
            principal = await self.identify(scope, public=public)
        except EmbedqError as exc:
            if public:  # a probe answers whatever the key store's state: anonymously
                scope.setdefault("state", {})["principal"] = None
                await self.app(scope, receive, send)
                return
            render = self.renderers.get(path, embedq_error_response)
            await render(exc)(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        state["principal"] = principal
        if principal is None or principal is OPEN:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        recorder = StatusRecorder(send)
        try:
            await self.app(scope, receive, recorder)
        finally:
            audit(principal, scope, recorder.status, state.get("inputs"),
                  (time.perf_counter() - started) * 1000)

    async def identify(self, scope: Scope, public: bool) -> Principal | None:
        """The caller; None for an anonymous caller of a public path."""
        authenticator = self.authenticator()
        if authenticator is None:
            return None if public else _starting()
        token = bearer_token(scope)
        # Database queries and Redis calls go to a thread; what is known here (bootstrap
        # keys, lookups cached for up to a second, keys without a rate) is not worth a
        # thread hop on every request.
        required = authenticator.required_known()
        if required is None:
            required = await run_in_threadpool(authenticator.required)
        if not required:
            return OPEN
        if token is None:
            if public:
                return None
            raise await self.refusal(authenticator, scope, NO_KEY)
        known, principal = authenticator.known(token)
        if not known:
            principal = await run_in_threadpool(authenticator.authenticate, token)
        if principal is None and not public:
            raise await self.refusal(authenticator, scope, BAD_KEY)
        limiter = self.limiter()
        if principal is not None and not public and limiter is not None \
                and principal.rate_per_s is not None:
            await run_in_threadpool(limiter.check, principal)
        return principal


    async def refusal(self, authenticator: Authenticator, scope: Scope, message: str
                      ) -> Unauthorized:
        """The 401 for a refused request; when no key is active at all (every key was
        revoked: a keyed process never turns open) it says so, and the log does too."""
        if not await run_in_threadpool(authenticator.without_active_key):
            return Unauthorized(message)
        self.refusals.note(scope)
        return Unauthorized(NO_ACTIVE_KEY)


class RefusalLog:
    """Warns, at most every `every_s`, that requests are refused because no key is
    active, with how many were since the last warning: a flood costs a line a minute."""

    def __init__(self, every_s: float = 60.0) -> None:
        self.every_s = every_s
        self._lock = threading.Lock()
        self._last: float | None = None
        self._count = 0

    def note(self, scope: Scope) -> None:
        now = time.monotonic()
        with self._lock:
            self._count += 1
            if self._last is not None and now - self._last < self.every_s:
                return
            count, self._count, self._last = self._count, 0, now
        audit_log.warning(
            "refused %d request(s) with 401 (latest: %s %s): no API key is active, every "
            "key is revoked, and this process stays keyed: create a key (`embedq keys "
            "create`) or restart it deliberately open", count, scope.get("method", ""),
            scope.get("path", ""))


def audit(principal: Principal, scope: Scope, status: int, inputs: int | None,
          ms: float) -> None:
    """One line per authenticated request: who, which route, the answer, how many inputs
    (routes that take texts set `request.state.inputs`) and how long. Never a text, a
    payload or the key: the route is the template (`/v1/jobs/{job_id}`)."""
    route = getattr(scope.get("route"), "path", None) or scope.get("path", "")
    audit_log.info("request tenant=%s key=%s method=%s route=%s status=%d inputs=%s ms=%.1f",
                   principal.tenant, principal.key_name, scope.get("method", ""), route,
                   status, "-" if inputs is None else inputs, ms)


def _starting() -> Principal:
    raise Unavailable("the server is still starting; retry in a moment", retry_after_s=1)


def principal_of(request: Request) -> Principal | None:
    """The caller of this request (None: anonymous, on a public path)."""
    principal: Principal | None = request.scope.get("state", {}).get("principal")
    return principal


def tenant_of(request: Request) -> str | None:
    """The tenant this request acts for (None: anonymous)."""
    principal = principal_of(request)
    return principal.tenant if principal is not None else None


def charge_texts(request: Request, texts: int) -> None:
    """Note `texts` for the audit line and count them against the caller's texts a day
    (DailyLimitReached past `texts_per_day`, nothing counted). It may ask Redis: call it
    from a thread (`admit_texts` does, when the key has a daily limit)."""
    request.state.inputs = texts
    principal = principal_of(request)
    quota: TextQuota | None = getattr(request.app.state, "quota", None)
    if principal is not None and quota is not None:
        quota.charge(principal, texts)


async def admit_texts(request: Request, texts: int) -> None:
    """`charge_texts` from the event loop: in a thread only for a key with a daily limit."""
    principal = principal_of(request)
    if principal is None or principal.texts_per_day is None:
        request.state.inputs = texts
        return
    await run_in_threadpool(charge_texts, request, texts)


def check_scope(request: Request, scope: str | None) -> Principal:
    """The caller, who must hold `scope` (None: any accepted key): 401 without one, 403
    without the scope. What a scope dependency runs, and what the embedding routes
    (POST /v1/embeddings, TEI's POST /embed and POST /) run as their first line instead:
    FastAPI's dependency solving and the bearer parser took 12% of the event loop's time
    under 50 one-text clients (docs/history.md, "The embedding routes check their scope
    themselves"). Their routers carry no dependency; OpenAPI shows them keyed (`KEYED`)."""
    principal = principal_of(request)
    if principal is None:
        raise Unauthorized(NO_KEY)  # a route behind no middleware: fail closed
    if scope is not None and not principal.allows(scope):
        raise Forbidden(
            f"the key {principal.key_name!r} of tenant {principal.tenant!r} lacks the "
            f"scope {scope!r} ({SCOPES[scope]}): create a key with it "
            f"(`embedq keys create --tenant {principal.tenant} --scopes {scope},...`)")
    return principal


def require_scope(scope: str | None) -> Callable[..., Any]:
    """A dependency: the caller, who must hold `scope` (None: any accepted key)."""
    if scope is not None and scope not in SCOPES:
        raise AssertionError(f"unknown scope {scope!r}")

    async def dependency(  # no I/O: async keeps it on the event loop, not a thread
        request: Request,
        _: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> Principal:
        return check_scope(request, scope)

    dependency.embedq_scope = scope  # type: ignore[attr-defined]
    return dependency


# OpenAPI's security of a route that checks its scope itself (`check_scope`): what a scope
# dependency would have added.
KEYED: dict[str, Any] = {"security": [{"HTTPBearer": []}]}


# One dependency per scope, shared by routers (`dependencies=[Depends(JOBS)]`) and
# handlers (`caller: JobsCaller`), so FastAPI runs the check once a request.
EMBED = require_scope("embed")
JOBS = require_scope("jobs")
CACHE_READ = require_scope("cache:read")
CACHE_WRITE = require_scope("cache:write")
ADMIN = require_scope("admin")
ANY_KEY = require_scope(None)

JobsCaller = Annotated[Principal, Depends(JOBS)]
CacheReader = Annotated[Principal, Depends(CACHE_READ)]
CacheWriter = Annotated[Principal, Depends(CACHE_WRITE)]
