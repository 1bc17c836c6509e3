"""The hot store on Redis: one round trip per call (MGET, a pipeline or a Lua script from
`lua/`), pub/sub for "done". Calls over many fingerprints are scripts: one command
whatever the key count, so the client does not build and parse thousands of replies while
it holds the GIL that online work needs."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from importlib import resources
from typing import Any

from redis.exceptions import RedisError

from embedq import stages
from embedq.coordination import layout
from embedq.coordination.hot_keys import live_hot_keys
from embedq.coordination.redis_link import (
    POOL_MAX_CONNECTIONS,
    bounded_client,
    map_redis_errors,
)
from embedq.coordination.store import (
    COUNTERS,
    HISTOGRAMS,
    BatchRecord,
    Claimed,
    HistogramSnapshot,
    Hold,
    HotStore,
    Interest,
    Leased,
    Settled,
    bucket_index,
    check_interest,
)

log = logging.getLogger(__name__)


def lua(name: str) -> str:
    """The body of `lua/<name>.lua`, shipped with the package."""
    return resources.files("embedq.coordination").joinpath(f"lua/{name}.lua").read_text()


SCRIPTS = ("claim", "lease", "release_if_owner", "extend", "count_attempts",
           "drop_unwanted", "incr_many", "wanted", "drop_stale")


class RedisHotStore(HotStore):
    remote = True

    def __init__(self, url: str, socket_timeout_s: float = 10.0,
                 connect_timeout_s: float = 5.0,
                 max_connections: int = POOL_MAX_CONNECTIONS) -> None:
        """Every call is bounded (`redis_link.bounded_client`): past `socket_timeout_s`
        without an answer, or without a free connection, it fails with
        BrokerUnavailable (retryable)."""
        super().__init__()
        self.url = url
        self.client: Any = bounded_client(url, socket_timeout_s, connect_timeout_s,
                                          max_connections)
        self._scripts = {name: self.client.register_script(lua(name)) for name in SCRIPTS}
        # Sent whole inside pipelines (a registered script there costs a SCRIPT EXISTS
        # round trip of its own); each is a few hundred bytes.
        self._bodies = {name: lua(name) for name in ("incr_many",)}
        self._listener_thread: threading.Thread | None = None
        self._closing = threading.Event()

    def _run(self, script: str, keys_: list[str], args: list[Any]) -> Any:
        with map_redis_errors():
            return self._scripts[script](keys=keys_, args=args)

    # --- hot vectors and outcomes
    def vectors(self, fps: list[str]) -> list[bytes | None]:
        if not fps:
            return []
        with map_redis_errors():
            return list(self.client.mget([layout.vector(fp) for fp in fps]))

    def settled(self, fps: list[str]) -> Settled:
        out = Settled({}, {}, [])
        if not fps:
            return out
        with map_redis_errors():
            raw = self.client.mget([layout.vector(fp) for fp in fps]
                                   + [layout.failure(fp) for fp in fps])
        for fp, vec, err in zip(fps, raw[:len(fps)], raw[len(fps):], strict=True):
            if vec is not None:
                out.vectors[fp] = vec
            elif err is not None:
                out.failures[fp] = json.loads(err)
            else:
                out.pending.append(fp)
        return out

    def record_batch(self, batch: BatchRecord) -> None:
        """One round trip, and one more before it when `batch.wanted` is not empty: the
        fingerprints some caller waits for, so that only their vectors are sent (a bulk
        batch of 2,048 ships 3 MB of vectors to Redis otherwise, nearly always for
        nothing). A caller whose interest lands between the two finds the vector in the
        durable store once the claim is freed, as any waiter for an orphan does."""
        with map_redis_errors():
            wanted = self._wanted(list(batch.wanted)) if batch.wanted else []
            pipe = self.client.pipeline(transaction=False)
            for vectors, ttl_s in batch.vectors:
                for fp, blob in vectors.items():
                    pipe.set(layout.vector(fp), blob, ex=ttl_s)
            for fp in wanted:
                pipe.set(layout.vector(fp), batch.wanted[fp], ex=batch.wanted_ttl_s)
            for fp, info in batch.failures.items():
                pipe.set(layout.failure(fp), json.dumps(info), ex=batch.failure_ttl_s)
            if batch.forget_attempts:
                pipe.delete(*[layout.attempts(fp) for fp in batch.forget_attempts])
            if batch.free_claims:
                pipe.delete(*[layout.claim(fp) for fp in batch.free_claims])
            if batch.done:
                pipe.publish(layout.DONE_CHANNEL, ",".join(batch.done))
            self._queue_incr(pipe, batch.counts)
            for observed in batch.observations:
                for name, value in observed.items():
                    key = layout.histogram(name)
                    pipe.hincrby(key, str(bucket_index(name, value)), 1)
                    pipe.hincrbyfloat(key, "sum", float(value))
                    pipe.hincrby(key, "count", 1)
            if len(pipe):
                pipe.execute()

    def _wanted(self, fps: list[str]) -> list[str]:
        found = self._scripts["wanted"](keys=[layout.interest(fp) for fp in fps], args=[])
        return [fps[int(i) - 1] for i in found]

    def _queue_incr(self, pipe: Any, counts: dict[str, int]) -> None:
        # EVAL, not the registered script: a pipeline holding one first asks SCRIPT
        # EXISTS, a round trip of its own, and this body is a few dozen bytes.
        flat = [x for kv in counts.items() if kv[1] for x in kv]
        if flat:
            pipe.eval(self._bodies["incr_many"], 1, layout.STATS, *flat)

    # --- claims and run leases
    def claim(self, fps: list[str], owner: str, ttl_ms: int,
              interest: Interest | None = None) -> Claimed:
        check_interest(interest)
        pairs = [(fp, caller) for fp, callers in (interest.callers if interest else {}).items()
                 for caller in callers]
        if not fps and not pairs:
            return Claimed([], [])
        won = self._run(
            "claim",
            [*(layout.claim(fp) for fp in fps), *(layout.interest(fp) for fp, _ in pairs),
             *(layout.failure(fp) for fp in fps)],
            [owner, ttl_ms, len(fps), interest.ttl_ms if interest else 1,
             *(caller for _, caller in pairs)])
        flags = [bool(r) for r in won]
        return Claimed([fp for fp, ok in zip(fps, flags, strict=True) if ok],
                       [fp for fp, ok in zip(fps, flags, strict=True) if not ok])

    def lease(self, fps: list[str], owner: str, ttl_ms: int) -> Leased:
        out = Leased({}, {}, [])
        if not fps:
            return out
        got = self._run("lease", [*(layout.run_lease(fp) for fp in fps),
                                  *(layout.vector(fp) for fp in fps),
                                  *(layout.attempts(fp) for fp in fps)], [owner, ttl_ms])
        for fp, g in zip(fps, got, strict=True):
            if isinstance(g, bytes):
                out.stored[fp] = g
            elif g is None:
                out.held.append(fp)
            else:
                out.won[fp] = int(g)
        return out

    def holders(self, hold: Hold, fps: list[str]) -> list[str | None]:
        if not fps:
            return []
        with map_redis_errors():
            raw = self.client.mget([layout.held(hold, fp) for fp in fps])
        return [r.decode() if r else None for r in raw]

    def release(self, hold: Hold, fps: list[str], owner: str | None = None) -> None:
        if not fps:
            return
        names = [layout.held(hold, fp) for fp in fps]
        if owner is not None:
            self._run("release_if_owner", names, [owner])
            return
        with map_redis_errors():
            self.client.delete(*names)

    def extend_leases(self, fps: list[str], ttl_ms: int) -> None:
        if fps:
            self._run("extend", [layout.run_lease(fp) for fp in fps], [ttl_ms])

    # --- attempts
    def count_attempts(self, fps: list[str], ttl_s: int) -> list[int]:
        if not fps:
            return []
        return [int(n) for n in self._run("count_attempts",
                                          [layout.attempts(fp) for fp in fps], [ttl_s])]

    def forget_attempts(self, fps: list[str]) -> None:
        if fps:
            self.record_batch(BatchRecord(forget_attempts=fps))

    def attempts(self, fps: list[str]) -> list[int]:
        if not fps:
            return []
        with map_redis_errors():
            return [int(r or 0) for r in self.client.mget([layout.attempts(fp) for fp in fps])]

    # --- interest
    def unwant(self, callers: dict[str, list[str]]) -> None:
        if not callers:
            return
        with map_redis_errors():
            pipe = self.client.pipeline(transaction=False)
            for fp, ids in callers.items():
                pipe.zrem(layout.interest(fp), *ids)
            pipe.execute()

    def drop_unwanted(self, owners: list[tuple[str, str]]) -> list[str]:
        if not owners:
            return []
        names = [layout.STATS]
        for fp, _ in owners:
            names += [layout.interest(fp), layout.claim(fp)]
        flags = self._run("drop_unwanted", names, [owner for _, owner in owners])
        return list(dict.fromkeys(fp for (fp, _), f in zip(owners, flags, strict=True) if f))

    # --- counters
    def incr(self, counts: dict[str, int]) -> None:
        flat = [x for kv in counts.items() if kv[1] for x in kv]
        if flat:
            self._run("incr_many", [layout.STATS], flat)

    def counters(self) -> dict[str, int]:
        with map_redis_errors():
            raw = self.client.hgetall(layout.STATS)
        out = {name: 0 for name in COUNTERS}
        out.update({k.decode(): int(v) for k, v in raw.items()})
        return out

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

    def ping(self) -> None:
        with map_redis_errors():
            self.client.ping()

    # --- notifications
    def _start_listening(self) -> None:
        with self._lock:
            if self._listener_thread is not None:
                return
            self._listener_thread = threading.Thread(
                target=self._listen, name="embedq-done-listener", daemon=True)
            self._listener_thread.start()

    def _listen(self) -> None:
        """Deliver "done" notifications; reconnect forever. Waiters also poll, so a
        notification lost during a reconnect costs latency, never correctness."""
        while not self._closing.is_set():
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.subscribe(layout.DONE_CHANNEL)
                while not self._closing.is_set():
                    msg = pubsub.get_message(timeout=1.0)
                    if msg and msg.get("type") == "message":
                        with stages.timed("notify"):
                            self._dispatch(msg["data"].decode().split(","))
            except Exception as exc:  # the listener outlives any failure; waiters poll
                if self._closing.is_set():
                    return  # close() pulled the connection from under the read
                if isinstance(exc, RedisError | OSError | ValueError):
                    log.warning("done-listener lost Redis (%s); reconnecting", exc)
                else:
                    log.exception("done-listener failed; reconnecting")
                self._closing.wait(0.5)
            finally:
                with contextlib.suppress(Exception):
                    pubsub.close()

    def close(self) -> None:
        self._closing.set()
        with contextlib.suppress(Exception):
            self.client.close()
