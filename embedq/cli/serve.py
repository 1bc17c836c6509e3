"""`embedq serve`: the HTTP API under uvicorn."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from typing import Any

from embedq.config import Settings
from embedq.errors import ConfigError


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "serve", help="run the HTTP API (OpenAI-compatible POST /v1/embeddings, /docs)"
    )
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to bind (default 127.0.0.1; 0.0.0.0 for every interface)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--workers", type=int, default=1,
                   help="API processes (needs EMBEDQ_BROKER_URL: embedded mode is one process)")
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    settings = Settings.from_env()  # a bad setting fails here, before any process starts
    if args.workers < 1:
        raise ConfigError("--workers must be at least 1")
    if args.workers > 1 and settings.embedded:
        raise ConfigError(
            "--workers above 1 needs a shared broker and store: set EMBEDQ_BROKER_URL and "
            "EMBEDQ_REDIS_URL, or serve embedded mode with --workers 1"
        )
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


def _run(args: argparse.Namespace) -> None:
    import uvicorn

    uvicorn.run(
        "embedq.api.app:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level=str(args.loglevel).lower(),
        access_log=False,
        timeout_graceful_shutdown=10,
    )
