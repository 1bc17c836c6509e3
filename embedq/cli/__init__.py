"""`embedq` commands: thin wrappers that parse, call the services, and format.

This module holds the parser and the core commands (worker, embed, stats, db, demo,
bench); each feature's commands live beside it (`serve.py`, `jobs.py`, `cache.py`,
`mcp.py`) and register themselves with `add_parser(subparsers)`.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import json
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from embedq.argtypes import at_least
from embedq.cli.logsetup import setup_logging
from embedq.config import Settings
from embedq.config.catalog import default_model
from embedq.errors import ConfigError, EmbedqError

log = logging.getLogger("embedq")

Handler = Callable[[argparse.Namespace], int]

# Each feature registers its own subcommands: `add_parser(subparsers)` in these modules.
FEATURE_COMMANDS = (
    "embedq.cli.serve",  # serve
    "embedq.cli.jobs",  # bulk, jobs, beat
    "embedq.cli.cache",  # cache
    "embedq.cli.mcp",  # mcp
    "embedq.cli.model",  # model export
    "embedq.cli.models",  # models list, reembed, switch
    "embedq.cli.keys",  # keys
)


# Commands whose process runs the EmbeddingService for requests.
SERVICE_COMMANDS = ("serve", "mcp")


def cluster_settings(command: str, instead: str) -> Settings:
    """Settings for a command that only makes sense with shared servers; a ConfigError
    saying what to set (and what works `instead`) in embedded mode."""
    settings = Settings.from_env()
    if settings.embedded:
        raise ConfigError(
            f"embedq {command} needs a shared broker: set EMBEDQ_BROKER_URL and "
            f"EMBEDQ_REDIS_URL ({instead})"
        )
    return settings


# --- worker
def cmd_worker(args: argparse.Namespace) -> int:
    from celery.signals import worker_ready

    from embedq.heap import settle
    from embedq.tasks.app import create_app
    from embedq.tasks.publish import check_login
    from embedq.workers.bodies import AppThreadPool, register
    from embedq.workers.runtime import WorkerRuntime

    settings = cluster_settings(
        "worker", "without them, embed/demo/Client start an embedded worker themselves")
    _require_tables(settings)
    # One model per worker: with EMBEDQ_MODELS `--model` (default: the default model)
    # picks it, with its tiers and its own queues.
    settings = settings.for_model(args.model or default_model(settings))
    queues = args.queues.split(",") if args.queues else [
        settings.queue.online_queue, settings.queue.bulk_queue,
    ]
    app = create_app(settings)
    check_login(app)  # before the model loads: a refused login would end in a traceback
    runtime = WorkerRuntime(settings, queues=queues, heartbeat=False)
    # The model and libraries are long-lived: out of the collector's walks (embedq/heap.py).
    settle(settings.worker.gc_gen0)
    register(app, runtime)
    # Live (counted in job waves, /readyz) once the consumer takes messages.
    worker_ready.connect(lambda **_: runtime.announce(), weak=False)
    worker = app.Worker(
        pool=AppThreadPool,
        concurrency=args.concurrency or settings.worker.concurrency,
        queues=queues,
        loglevel=args.loglevel.upper(),
        hostname=f"embedq@{socket.gethostname()}-{os.getpid()}",
        without_mingle=True,
        without_gossip=True,
    )
    worker.start()
    runtime.close()
    return int(worker.exitcode or 0)


def _require_tables(settings: Settings) -> None:
    from embedq.models import Database

    db = Database(settings.resolved_database_url)
    try:
        if not db.has_tables("embeddings"):
            raise ConfigError(
                f"the database {db.engine.url.render_as_string(hide_password=True)} has no "
                "embedq tables: run `embedq db upgrade` first"
            )
    finally:
        db.dispose()


# --- embed, stats
def _no_online_worker(client: Any, model: str | None, precision: str | None) -> str | None:
    """On a cluster whose online misses go to workers: what to start when no live worker
    on the online queue serves the request's model at its revision (the command would wait
    out EMBEDQ_REQUEST_TIMEOUT_S, saying nothing), else None."""
    from embedq.coordination.store import serving
    from embedq.errors import Unavailable

    settings = client.service.settings
    if settings.embedded or settings.queue.online_encode == "local":
        return None
    spec = client.service.spec(model, precision=precision)
    try:
        workers = client.service.hot.live_workers()
    except Unavailable:
        return None  # the request itself will say
    queue = client.service.executor.queue_of(spec)
    served = serving(workers, queue, spec.model, spec.revision)
    if served is None:
        return None
    if not served:
        return (f"no live worker consumes the queue {queue!r}: texts not yet cached wait up "
                f"to {settings.queue.request_timeout_s:g} s (EMBEDQ_REQUEST_TIMEOUT_S) for "
                "one; start `embedq worker`")
    return (f"the live workers on the queue {queue!r} serve {', '.join(served)}, not "
            f"{spec.model}@{spec.revision}: start `embedq worker` with this shell's "
            "EMBEDQ_MODEL, EMBEDQ_MODEL_REVISION and EMBEDQ_TIERS")


def cmd_embed(args: argparse.Namespace) -> int:
    from embedq.client import Client

    texts = list(args.texts)
    if not texts:
        texts = [line.rstrip("\n") for line in sys.stdin if line.strip()]
    client = Client()
    waiting = _no_online_worker(client, args.model, args.precision)
    if waiting:
        print(f"embedq: warning: {waiting}", file=sys.stderr)
    result = client.embed_detailed(
        texts, model=args.model, dimensions=args.dimensions,
        normalize=not args.no_normalize, precision=args.precision,
    )
    failed = 0
    if args.json:
        from embedq import wire

        rows: list[dict[str, Any]] = []
        for text, o in zip(texts, result.outcomes, strict=True):
            if o.error is not None:
                failed += 1
                rows.append({"text": text, "error": str(o.error)})
            else:
                assert o.vector is not None
                rows.append({"text": text, "source": o.source, "embedding": wire.floats(o.vector)})
        json.dump({"model": result.spec.model, "data": rows}, sys.stdout)
        sys.stdout.write("\n")
    else:
        for text, o in zip(texts, result.outcomes, strict=True):
            if o.error is not None:
                failed += 1
                print(f"{text[:40]!r}: error: {o.error}")
            else:
                assert o.vector is not None
                head = ", ".join(f"{x:+.4f}" for x in o.vector[:4])
                print(f"{text[:40]!r}: dim={o.vector.shape[0]} [{head}, ...] ({o.source})")
    return 1 if failed else 0


def cmd_stats(args: argparse.Namespace) -> int:
    from embedq.coordination import make_hot_store
    from embedq.coordination.hot_keys import KINDS, hot_namespaces

    settings = Settings.from_env()
    hot = make_hot_store(settings)
    counters = hot.counters()
    hot_keys = hot.hot_keys()
    if args.json:
        print(json.dumps({**counters, "hot_keys": hot_keys}, sort_keys=True))
    else:
        width = max(len(k) for k in counters)
        for name, value in counters.items():
            print(f"{name:<{width}}  {value}")
        for kind, entries in hot_keys.items():
            if entries and kind in KINDS:
                print(f"hottest {kind}s (asks, halving every 5 minutes):")
                for key, count in entries:
                    print(f"  {count:10.1f}  {key}")
        per_s = settings.semantic.hot_lookups_per_s
        busiest = hot_namespaces(hot_keys, per_s)
        if busiest:
            print(f"hot namespaces (lookups/s past EMBEDQ_SEMANTIC_HOT_LOOKUPS_PER_S={per_s:g}):")
            for key, rate in busiest:
                print(f"  {rate:10.2f}  {key}")
        if settings.embedded:
            print("(embedded mode: counters live in this process only; set EMBEDQ_REDIS_URL "
                  "for cluster-wide counters)")
    return 0


# --- db
def cmd_db(args: argparse.Namespace) -> int:
    from embedq.models import migrate

    url = Settings.from_env().resolved_database_url
    if args.action == "upgrade":
        migrate.upgrade(url, args.revision or "head")
    elif args.action == "downgrade":
        if not args.revision:
            raise ConfigError("embedq db downgrade needs a revision, e.g. `base` or `0001`")
        migrate.downgrade(url, args.revision)
    print(f"database at revision {migrate.current(url) or 'base'}")
    return 0


# --- demo and bench
def cmd_demo(args: argparse.Namespace) -> int:
    from embedq.demo import run_demo

    return run_demo(args.file, args.lines)


def cmd_bench(args: argparse.Namespace) -> int:
    from embedq import bench

    return bench.run(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="embedq", description=__doc__)
    parser.add_argument("--loglevel", default=os.environ.get("EMBEDQ_LOGLEVEL", "warning"))
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("worker", help="run a worker (needs EMBEDQ_BROKER_URL)")
    p.add_argument("--concurrency", type=at_least(0), default=0,
                   help="task threads (default: settings)")
    p.add_argument("--queues", default="", help="comma-separated, in priority order")
    p.add_argument("--model", default=None, metavar="NAME",
                   help="the model to serve, one of EMBEDQ_MODELS (default: the default "
                        "model), on its own queues")
    p.set_defaults(func=cmd_worker, loglevel_default="info")

    p = sub.add_parser("embed", help="embed texts (arguments, or one per stdin line)")
    p.add_argument("texts", nargs="*")
    p.add_argument("--json", action="store_true")
    p.add_argument("--dimensions", type=int, default=None)
    p.add_argument("--no-normalize", action="store_true")
    p.add_argument("--model", default=None, metavar="NAME",
                   help="a served model or alias (`embedq models list`); default: the default")
    p.add_argument("--precision", default=None, metavar="TIER",
                   help="a served tier (EMBEDQ_TIERS, e.g. int8); default the first")
    p.set_defaults(func=cmd_embed)

    p = sub.add_parser("stats", help="cluster-wide counters")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("db", help="database migrations (Alembic)")
    p.add_argument("action", choices=["upgrade", "downgrade", "current"])
    p.add_argument("revision", nargs="?")
    p.set_defaults(func=cmd_db)

    p = sub.add_parser("demo", help="embed a slice of the Debian corpus twice and report")
    p.add_argument("--file", default=None, help="JSONL with a 'text' field (default: bundled)")
    p.add_argument("--lines", type=at_least(1), default=2000)
    p.set_defaults(func=cmd_demo)

    from embedq import bench

    bench.add_parser(sub, cmd_bench)
    for module in FEATURE_COMMANDS:
        importlib.import_module(module).add_parser(sub)
    return parser


def run() -> None:
    """The `embedq` command: `main`, then a quick exit.

    Once a command has returned, the interpreter's own teardown (freeing each module of
    SQLAlchemy, Celery, kombu, redis and the service, about 120,000 objects) took 0.2-0.3
    s more, a quarter of a short command's time (`embedq jobs list`: 1.1 s, 0.8 s
    without). So the exit handlers run (logging's flush among them), the streams are
    flushed and the process ends there, unless a thread that is not a daemon still runs
    (the interpreter would wait for it: then it exits as usual)."""
    code = main()
    if any(t is not threading.main_thread() and not t.daemon and t.is_alive()
           for t in threading.enumerate()):
        sys.exit(code)
    atexit._run_exitfuncs()  # what the interpreter runs before its teardown
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = args.loglevel
    explicit = "--loglevel" in (argv or sys.argv) or "EMBEDQ_LOGLEVEL" in os.environ
    if args.command == "worker" and not explicit:
        level = "info"
    args.loglevel = level  # the worker hands it on to Celery's own logging set-up
    setup_logging(level)
    if args.command in SERVICE_COMMANDS and not explicit:
        # The processes that answer requests log who computed and who waited (leader and
        # waiter lines, INFO) by default, though everything else stays at warning there.
        logging.getLogger("embedq.service").setLevel(logging.INFO)
    if args.command in (*SERVICE_COMMANDS, "keys") and not explicit:
        # The audit trail: one line per authenticated request and per key change.
        logging.getLogger("embedq.audit").setLevel(logging.INFO)
    try:
        code: int = args.func(args)
    except EmbedqError as exc:
        print(f"embedq: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return code
