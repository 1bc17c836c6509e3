"""Run an embedq command with timing spans around each step of the online path.

    python scripts/trace_online.py SPANS.jsonl serve --port 8000
    python scripts/trace_online.py SPANS.jsonl worker

Wraps the steps of a request (API side: service call, hot lookup, durable lookup, claim,
publish, wait, wake-up, counters; worker side: message handling, durable lookup, attempt
counters, run leases, batcher queue, model, Postgres write, Redis write, ack) and writes
one JSON line per call: span name, wall start and end (`time.time()`, comparable across
processes on one host), the calling thread's CPU seconds in the span, and the
fingerprints it handled. `scripts/online_profile.py` reads the files back into a table.
A measuring tool only: nothing in embedq imports it.
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

_out: Any = None
_lock = threading.Lock()


def _emit(name: str, t0: float, t1: float, cpu: float, fps: list[str]) -> None:
    line = json.dumps({"span": name, "t0": t0, "t1": t1, "cpu": cpu, "fps": fps})
    with _lock:
        _out.write(line + "\n")


def _wrap(owner: Any, attr: str, name: str, fps_of: Callable[..., list[str]]) -> None:
    original = getattr(owner, attr)

    if inspect.iscoroutinefunction(original):
        @functools.wraps(original)
        async def traced_async(*args: Any, **kwargs: Any) -> Any:
            t0 = time.time()
            try:
                return await original(*args, **kwargs)
            finally:
                _emit(name, t0, time.time(), 0.0, _safe(fps_of, args, kwargs))

        setattr(owner, attr, traced_async)
        return

    @functools.wraps(original)
    def traced(*args: Any, **kwargs: Any) -> Any:
        t0, c0 = time.time(), time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            _emit(name, t0, time.time(), time.thread_time() - c0, _safe(fps_of, args, kwargs))

    setattr(owner, attr, traced)


def _safe(fps_of: Callable[..., list[str]], args: Any, kwargs: Any) -> list[str]:
    try:
        return [str(f)[:16] for f in fps_of(*args, **kwargs)]
    except Exception:
        return []


def _none(*args: Any, **kwargs: Any) -> list[str]:
    return []


def _arg(i: int) -> Callable[..., list[str]]:
    return lambda *a, **k: list(a[i])


def install() -> None:
    from embedq import coordination
    from embedq.cache.durable import DurableStore
    from embedq.cache.redis_hot import RedisHotStore
    from embedq.cache.waiters import Waiters
    from embedq.service import EmbeddingService

    # --- API side
    _wrap(EmbeddingService, "embed", "api.service_call", _none)
    _wrap(RedisHotStore, "get_vectors", "redis.mget_vectors", _arg(1))
    _wrap(DurableStore, "get_many", "pg.lookup", _arg(1))
    _wrap(EmbeddingService, "_claim", "redis.claim", _arg(1))
    _wrap(EmbeddingService, "_submit", "broker.publish", lambda s, spec, p: [f for f, _ in p])
    _wrap(EmbeddingService, "_collect", "api.await", _arg(2))
    _wrap(EmbeddingService, "_record", "redis.counters", _none)
    _wrap(Waiters, "notify", "api.wake", _arg(1))
    try:
        from embedq.api import batching
        from embedq.api.routes import embeddings

        _wrap(batching.RequestCoalescer, "embed", "api.batcher", _none)
        _wrap(embeddings, "refuse_when_overloaded", "api.depth", _none)
        _wrap(embeddings, "count_tokens", "api.tokens", _none)
    except ImportError:
        pass

    # --- worker side
    from embedq.tasks import redis_transport
    from embedq.workers import batcher, fencing, runtime, writer

    _wrap(runtime.WorkerRuntime, "handle_embed", "worker.task",
          lambda s, payload, *a, **k: [fp for fp, _ in payload["items"]])
    _wrap(fencing.Fencing, "triage", "worker.triage", lambda s, attempts: list(attempts))
    _wrap(fencing.Fencing, "count_attempt", "redis.attempts_incr", _arg(1))
    _wrap(coordination, "lease_unless_stored", "redis.lease_acquire", _arg(1))  # + attempts
    _wrap(coordination, "release_leases", "redis.lease_release", _arg(1))
    _wrap(batcher.Batcher, "submit", "worker.batcher_submit",
          lambda s, items, *a, **k: [i.fp for i in items])
    _wrap(batcher.Batcher, "_encode", "worker.encode_step",
          lambda s, batch, items, *a: [i.fp for i in items])
    _wrap(writer.BatchWriter, "__call__", "worker.write_step",
          lambda s, b: [i.fp for w in b.waiters for i in w])
    _wrap(DurableStore, "put_many", "pg.write", lambda s, rows: [r.fingerprint for r in rows])
    _wrap(RedisHotStore, "record_batch", "redis.record_batch", lambda s, r: r.done)
    _wrap(redis_transport.Channel, "basic_ack", "broker.ack", _none)
    _wrap(RedisHotStore, "acquire", "redis.acquire", _none)
    from embedq.encoders.sentence import SentenceTransformerEncoder

    _wrap(SentenceTransformerEncoder, "encode", "model.encode", _none)


def main() -> None:
    global _out
    path, argv = sys.argv[1], sys.argv[2:]
    _out = open(path, "a", buffering=1)  # noqa: SIM115 - open for the process's life
    install()
    from embedq.cli import main as cli_main

    sys.exit(cli_main(argv))


if __name__ == "__main__":
    main()
