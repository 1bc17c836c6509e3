"""`embedq serve`: the HTTP API under uvicorn.

With no API key configured (EMBEDQ_API_KEYS unset and no key in the database) the API
is open, so it listens beyond loopback only when told `--insecure-open`.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import shutil
import tempfile
from typing import Any

from embedq.argtypes import port
from embedq.config import Settings
from embedq.errors import ConfigError


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "serve", help="run the HTTP API (OpenAI-compatible POST /v1/embeddings, /docs)"
    )
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to bind (default 127.0.0.1; 0.0.0.0 for every interface)")
    p.add_argument("--port", type=port, default=8000)
    p.add_argument("--workers", type=int, default=1,
                   help="API processes (needs EMBEDQ_BROKER_URL: embedded mode is one process)")
    p.add_argument("--insecure-open", action="store_true",
                   help="listen beyond loopback even with no API key configured (anyone "
                        "who reaches the port may use, read and delete everything)")
    p.add_argument("--online-encode", choices=("queue", "local"),
                   help="who encodes online misses: the online queue's workers (queue, the "
                        "default) or this process, which then loads the model (local; the "
                        "same as EMBEDQ_ONLINE_ENCODE)")
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    if args.online_encode:  # the API processes read it from the environment
        os.environ["EMBEDQ_ONLINE_ENCODE"] = args.online_encode
    settings = Settings.from_env()  # a bad setting fails here, before any process starts
    if args.workers < 1:
        raise ConfigError("--workers must be at least 1")
    if args.workers > 1 and settings.embedded:
        raise ConfigError(
            "--workers above 1 needs a shared broker and store: set EMBEDQ_BROKER_URL and "
            "EMBEDQ_REDIS_URL, or serve embedded mode with --workers 1"
        )
    if not args.insecure_open and not is_loopback(args.host) and not keys_configured(settings):
        raise ConfigError(
            f"embedq serve --host {args.host} would open the API to anyone who can reach it: "
            "set EMBEDQ_API_KEYS=key1,key2 or create a key (`embedq keys create --tenant "
            "NAME`), listen on 127.0.0.1, or pass --insecure-open to accept that")
    if not settings.embedded:
        from embedq.cli import _require_tables
        from embedq.tasks.app import create_app
        from embedq.tasks.publish import check_login

        _require_tables(settings)  # an unmigrated database: said, not a startup traceback
        check_login(create_app(settings))  # a refused login: no API process starts
    shared_metrics = None
    if args.workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # The API processes share their request metrics through this folder.
        shared_metrics = tempfile.mkdtemp(prefix="embedq-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = shared_metrics
    try:
        _run(args)
    finally:
        if shared_metrics is not None:
            shutil.rmtree(shared_metrics, ignore_errors=True)
    return 0


def is_loopback(host: str) -> bool:
    """Whether `host` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any interface


def keys_configured(settings: Settings) -> bool:
    """Whether the API will require keys: bootstrap keys, or an active key stored."""
    if settings.api.keys:
        return True
    from embedq.models import Database
    from embedq.tenants import KeyStore

    db = Database.from_settings(settings)
    try:
        return db.has_tables("api_keys") and KeyStore(db).any_active()
    finally:
        db.dispose()


def uvicorn_options(args: argparse.Namespace) -> dict[str, Any]:
    """How `embedq serve` runs uvicorn: the app factory, with a response's head and body
    sent in one write (embedq/api/transport.py)."""
    from embedq.api.transport import JoiningHttpToolsProtocol

    return {
        "app": "embedq.api.app:create_app",
        "factory": True,
        "host": args.host,
        "port": args.port,
        "workers": args.workers,
        "log_level": str(args.loglevel).lower(),
        "access_log": False,
        "http": JoiningHttpToolsProtocol,
        "timeout_graceful_shutdown": 10,
    }


def _run(args: argparse.Namespace) -> None:
    import uvicorn

    uvicorn.run(**uvicorn_options(args))
