"""`embedq mcp [--transport stdio|http]`.

Over HTTP every request needs a Bearer key (the API's keys, with the same scopes) once
keys exist, checked before the body is read, and counts against the key's request rate
(the API's Redis bucket) and texts a day; each request leaves an audit line on stderr.
With no key configured the server listens on loopback only. Over stdio the tools act for
`--tenant` with every scope: whoever can start the process can already read its database.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from embedq.argtypes import port
from embedq.cli.logsetup import setup_logging
from embedq.errors import ConfigError


def cmd_mcp(args: argparse.Namespace) -> int:
    from embedq.deployment import Deployment
    from embedq.mcp.server import create_server
    from embedq.tenants import Principal, check_tenant

    # stdout carries the protocol on stdio: every log line goes to stderr.
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    setup_logging(logging.WARNING, sys.stderr)
    if args.transport == "http":
        # One audit line per authenticated request, as `embedq serve` writes them.
        logging.getLogger("embedq.audit").setLevel(logging.INFO)
    from embedq.tenants.quota import TextQuota

    service = Deployment.from_settings().service
    quota = TextQuota(getattr(service.hot, "client", None))
    server = create_server(service, Principal.everything("local", check_tenant(args.tenant)),
                           quota if args.transport == "http" else None)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        _serve_http(server, service, args.host, args.port)
    return 0


def _serve_http(server: Any, service: Any, host: str, port: int) -> None:
    import uvicorn

    from embedq.api.auth import AuthMiddleware
    from embedq.api.limits import BodyLimitMiddleware
    from embedq.cli.serve import is_loopback
    from embedq.tenants import Authenticator, KeyStore
    from embedq.tenants.ratelimit import RateLimiter

    authenticator = Authenticator(service.settings.api.keys, KeyStore(service.db))
    if not authenticator.required() and not is_loopback(host):
        raise ConfigError(
            f"embedq mcp --transport http --host {host} would serve the tools to anyone who "
            "can reach it with no key: set EMBEDQ_API_KEYS or create a key (`embedq keys "
            "create`), or listen on 127.0.0.1")
    # The API's middleware and buckets: a key's requests a second are counted in the same
    # Redis bucket whether it calls the API or the tools, and each request is audited.
    limiter = RateLimiter(getattr(service.hot, "client", None))
    # The API's body limit too (EMBEDQ_MAX_BODY_BYTES), behind the key check: a caller
    # without a key is refused before a byte of its body is read.
    bounded = BodyLimitMiddleware(server.streamable_http_app(host=host),
                                  max_body_bytes=service.settings.api.max_body_bytes)
    app = AuthMiddleware(bounded, lambda: authenticator, public=(), limiter=lambda: limiter)
    uvicorn.run(app, host=host, port=port, log_level="warning")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("mcp", help="run the MCP server (tools: embed, semantic cache, jobs)")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=port, default=8765)
    p.add_argument("--tenant", default="default",
                   help="stdio: the tenant the tools act for (HTTP: the key's tenant)")
    p.set_defaults(func=cmd_mcp)
