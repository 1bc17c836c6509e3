"""The Redis hot store's keys that belong to the whole deployment, not to a fingerprint:
worker heartbeats, hot keys, a running job's chunk progress, histograms. Each is one key
(a hash), so they work alike on one Redis and on a Redis Cluster."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from embedq.coordination import layout
from embedq.coordination.hot_keys import live_hot_keys
from embedq.coordination.redis_link import map_redis_errors
from embedq.coordination.store import HISTOGRAMS, HistogramSnapshot


class SharedKeys:
    """Mixed into `RedisHotStore`, which provides the client and its scripts."""

    client: Any
    _run: Callable[[str, list[str], list[Any]], Any]  # RedisHotStore's: run a Lua script

    def histograms(self) -> dict[str, HistogramSnapshot]:
        names = list(HISTOGRAMS)
        with map_redis_errors():
            pipe = self.client.pipeline(transaction=False)
            for name in names:
                pipe.hgetall(layout.histogram(name))
            raw = pipe.execute()
        out = {}
        for name, fields in zip(names, raw, strict=True):
            if not fields:
                continue
            got = {k.decode(): v for k, v in fields.items()}
            bounds = HISTOGRAMS[name]
            buckets = tuple(int(got.get(str(i), 0)) for i in range(len(bounds) + 1))
            out[name] = HistogramSnapshot(
                bounds, buckets, float(got.get("sum", 0)), int(got.get("count", 0)))
        return out

    # --- liveness
    def heartbeat(self, worker_id: str, info: dict[str, object], ttl_s: int) -> None:
        beat = json.dumps({"until": time.time() + ttl_s, "info": info})
        with map_redis_errors():
            pipe = self.client.pipeline(transaction=False)
            pipe.hset(layout.WORKERS, worker_id, beat)
            # The key per worker that readers before the hash scanned for: kept while a
            # rolling upgrade may still run them (docs/redis.md, "Key changes").
            pipe.set(f"{layout.WORKERS}:{worker_id}", json.dumps(info), ex=max(1, ttl_s))
            pipe.execute()

    def forget_worker(self, worker_id: str) -> None:
        with map_redis_errors():
            pipe = self.client.pipeline(transaction=False)
            pipe.hdel(layout.WORKERS, worker_id)
            pipe.delete(f"{layout.WORKERS}:{worker_id}")
            pipe.execute()

    def live_workers(self) -> dict[str, dict[str, object]]:
        """One HGETALL (a SCAN for per-worker keys walked the whole keyspace, millions
        of vectors included); expired heartbeats are dropped from the hash as read."""
        with map_redis_errors():
            raw = self.client.hgetall(layout.WORKERS)
        now, live, stale = time.time(), {}, []
        for field, value in raw.items():
            beat = json.loads(value)
            if beat["until"] > now:
                live[field.decode()] = beat["info"]
            else:
                stale += [field, value]
        if stale:
            self._run("drop_stale", [layout.WORKERS], stale)
        return live

    def note_chunk_progress(self, job_id: str, chunk: int, done: int, ttl_s: int) -> None:
        key = layout.chunk_progress(job_id)
        with map_redis_errors():
            pipe = self.client.pipeline(transaction=False)
            pipe.hset(key, str(chunk), done)
            pipe.expire(key, ttl_s)
            pipe.execute()

    def chunk_progress(self, job_id: str) -> dict[int, int]:
        with map_redis_errors():
            raw = self.client.hgetall(layout.chunk_progress(job_id))
        return {int(k): int(v) for k, v in raw.items()}

    def publish_hot_keys(self, process_id: str,
                         top: dict[str, list[tuple[str, float]]]) -> None:
        entry = json.dumps({"at": time.time(), "top": top})
        with map_redis_errors():
            self.client.hset(layout.HOT_KEYS, process_id, entry)

    def hot_keys(self) -> dict[str, list[tuple[str, float]]]:
        with map_redis_errors():
            raw = {k.decode(): v for k, v in self.client.hgetall(layout.HOT_KEYS).items()}
        live, stale = live_hot_keys({k: json.loads(v) for k, v in raw.items()})
        if stale:
            self._run("drop_stale", [layout.HOT_KEYS], [x for k in stale for x in (k, raw[k])])
        return live
