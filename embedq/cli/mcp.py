"""`embedq mcp [--transport stdio|http]`."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any


def cmd_mcp(args: argparse.Namespace) -> int:
    from embedq.deployment import Deployment
    from embedq.mcp.server import create_server

    # stdout carries the protocol on stdio: every log line goes to stderr.
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server = create_server(Deployment.from_settings().service)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("mcp", help="run the MCP server (tools: embed, semantic cache, jobs)")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.set_defaults(func=cmd_mcp)
