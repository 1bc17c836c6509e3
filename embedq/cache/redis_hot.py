"""HotStore on Redis: one round trip per call (MGET, a pipeline or a script), pub/sub for
"done". Calls over many keys (claims and leases of a whole chunk, their refresh, attempt
counters) are Lua scripts: one command whatever the key count, so the client does not
build and parse thousands of replies while it holds the GIL that online work needs."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Iterator
from queue import Empty, LifoQueue
from typing import Any

import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from embedq.cache import keys
from embedq.cache.hot import (
    COUNTERS,
    HISTOGRAMS,
    BatchRecord,
    HistogramSnapshot,
    HotStore,
    bucket_index,
    check_unless,
)
from embedq.cache.redis_errors import OUT_OF_MEMORY, RedisOutOfMemoryError
from embedq.errors import BrokerOutOfMemory, BrokerUnavailable

log = logging.getLogger(__name__)

_RELEASE_IF_OWNER = """
local n = 0
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then n = n + redis.call('DEL', key) end
end
return n
"""

# Counters: field, amount, field, amount, ... in one command.
_INCR_MANY = """
for i = 1, #ARGV, 2 do redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) end
"""

_ACQUIRE = """
local won = {}
for i, key in ipairs(KEYS) do
  won[i] = redis.call('SET', key, ARGV[1], 'NX', 'PX', ARGV[2]) and 1 or 0
end
return won
"""

# KEYS: n keys to acquire, n keys to look at, then none or n counters; ARGV: owner, ttl
# ms, n. Per index: the value of the key looked at when it exists (nothing acquired), else
# where SET NX won the counter's value (0 when absent or not asked for), else nil.
_ACQUIRE_UNLESS = """
local n = tonumber(ARGV[3])
local counted = #KEYS > 2 * n
local out = {}
for i = 1, n do
  local there = redis.call('GET', KEYS[n + i])
  if there then
    out[i] = there
  elseif redis.call('SET', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then
    out[i] = counted and tonumber(redis.call('GET', KEYS[2 * n + i]) or '0') or 0
  else
    out[i] = false
  end
end
return out
"""

# Interest is a sorted set per fingerprint: caller id -> the epoch ms its wait ends, by
# Redis's clock (TIME), so API and worker hosts need no common clock. The key lives as
# long as its latest caller; members past their end are pruned on the next registration.
_NOW_MS = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
"""

# KEYS: n claim keys, then one interest key per (fingerprint, caller), then none or n keys
# to delete where the claim at the same index is won (the failure a won claim clears).
# ARGV: owner, claim ttl ms, n, interest ttl ms, then the caller of each interest key.
_ACQUIRE_WANTED = _NOW_MS + """
local n = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local m = #ARGV - 4
local clear = #KEYS - n - m
local ends = string.format('%d', now + ttl)
for i = n + 1, n + m do
  local key = KEYS[i]
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now))
  redis.call('ZADD', key, 'GT', ends, ARGV[i - n + 4])
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end
local won = {}
for i = 1, n do
  if redis.call('SET', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then
    won[i] = 1
    if clear > 0 then redis.call('DEL', KEYS[n + m + i]) end
  else
    won[i] = 0
  end
end
return won
"""

# KEYS[1]: the stats hash; then per (fingerprint, owner) its interest key and claim key.
# ARGV: the owner of each pair. Returns 1 per pair whose fingerprint nobody wants.
_DROP_UNWANTED = _NOW_MS + """
local live = string.format('(%d', now)
local dropped = {}
local seen = {}
local n = 0
for i = 1, #ARGV do
  local want, claim = KEYS[2 * i], KEYS[2 * i + 1]
  if redis.call('ZCOUNT', want, live, '+inf') == 0 then
    dropped[i] = 1
    if redis.call('GET', claim) == ARGV[i] then redis.call('DEL', claim) end
    if not seen[want] then
      seen[want] = true
      n = n + 1
    end
  else
    dropped[i] = 0
  end
end
if n > 0 then redis.call('HINCRBY', KEYS[1], 'abandoned', n) end
return dropped
"""

_EXTEND = """
for i, key in ipairs(KEYS) do redis.call('PEXPIRE', key, ARGV[1]) end
return #KEYS
"""

_ADD_ATTEMPTS = """
local counts = {}
for i, key in ipairs(KEYS) do
  counts[i] = redis.call('INCR', key)
  redis.call('EXPIRE', key, ARGV[1])
end
return counts
"""


# Connections one process keeps to Redis. Callers past that many wait for a free one (up to
# the socket timeout) rather than being refused: 200 waiting requests in one API process
# must not fail while Redis is healthy.
POOL_MAX_CONNECTIONS = 100


class PoolExhausted(RedisError):
    """Every connection of this process's pool stayed busy for the whole wait."""


class _WaitingQueue(LifoQueue[Any]):
    """The pool's queue of idle connections; running dry says so (redis-py's own pool
    raises a ConnectionError that reads like Redis being down)."""

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        try:
            return super().get(block, timeout)
        except Empty:
            raise PoolExhausted(
                f"all {self.maxsize} Redis connections of this process stayed busy for "
                f"{timeout} s (Redis itself answered); the process has more concurrent "
                "callers than connections: retry shortly, or spread the load over more "
                "processes") from None


@contextlib.contextmanager
def map_redis_errors() -> Iterator[None]:
    try:
        yield
    except PoolExhausted as exc:
        raise BrokerUnavailable(str(exc)) from exc
    except (RedisConnectionError, RedisTimeoutError) as exc:
        raise BrokerUnavailable(f"Redis is unreachable ({exc}); retry shortly") from exc
    except RedisOutOfMemoryError as exc:
        raise BrokerOutOfMemory(OUT_OF_MEMORY) from exc
    except RedisError as exc:
        raise BrokerUnavailable(f"Redis refused the command: {exc}") from exc


def redis_link_options(socket_timeout_s: float, connect_timeout_s: float) -> dict[str, Any]:
    """redis-py connection options that bound every wait on the link."""
    return {
        "socket_timeout": socket_timeout_s,
        "socket_connect_timeout": connect_timeout_s,
        "socket_keepalive": True,
        "health_check_interval": max(1, int(socket_timeout_s)),
        "retry_on_timeout": False,
    }


class RedisHotStore(HotStore):
    remote = True

    def __init__(self, url: str, socket_timeout_s: float = 10.0,
                 connect_timeout_s: float = 5.0,
                 max_connections: int = POOL_MAX_CONNECTIONS) -> None:
        """Every call is bounded: a link that goes silent fails a command after
        `socket_timeout_s` (BrokerUnavailable, retryable) instead of hanging it; keepalives
        and a ping before reusing a connection idle past the socket timeout find dead ones.
        At most `max_connections` connections; a caller past them waits for one as long as
        for a reply (`socket_timeout_s`), then fails with BrokerUnavailable saying so."""
        super().__init__()
        self.url = url
        pool = redis.BlockingConnectionPool.from_url(
            url, max_connections=max_connections, timeout=socket_timeout_s,
            queue_class=_WaitingQueue,
            **redis_link_options(socket_timeout_s, connect_timeout_s))
        client: Any = redis.Redis(connection_pool=pool)
        client.auto_close_connection_pool = True  # close() disconnects the pool too
        self.client: Any = client
        self._release = self.client.register_script(_RELEASE_IF_OWNER)
        self._acquire = self.client.register_script(_ACQUIRE)
        self._acquire_unless = self.client.register_script(_ACQUIRE_UNLESS)
        self._incr_many = self.client.register_script(_INCR_MANY)
        self._extend = self.client.register_script(_EXTEND)
        self._add_attempts = self.client.register_script(_ADD_ATTEMPTS)
        self._acquire_wanted = self.client.register_script(_ACQUIRE_WANTED)
        self._drop_unwanted = self.client.register_script(_DROP_UNWANTED)
        self._listener_thread: threading.Thread | None = None
        self._closing = threading.Event()

    def get_vectors(self, fps: list[str]) -> list[bytes | None]:
        if not fps:
            return []
        with map_redis_errors():
            return list(self.client.mget([keys.vector(fp) for fp in fps]))

    def put_vectors(self, vectors: dict[str, bytes], ttl_s: int) -> None:
        if not vectors:
            return
        with map_redis_errors():
            pipe = self.client.pipeline(transaction=False)
            _queue_vectors(pipe, vectors, ttl_s)
            pipe.execute()

    def get_failures(self, fps: list[str]) -> list[dict[str, str] | None]:
        if not fps:
            return []
        with map_redis_errors():
            raw = self.client.mget([keys.failure(fp) for fp in fps])
        return [json.loads(r) if r else None for r in raw]

    def get_outcomes(self, fps: list[str]) -> list[tuple[bytes | None, dict[str, str] | None]]:
        if not fps:
            return []
        with map_redis_errors():
            raw = self.client.mget([keys.vector(fp) for fp in fps]
                                   + [keys.failure(fp) for fp in fps])
        n = len(fps)
        return [(vec, json.loads(err) if err else None)
                for vec, err in zip(raw[:n], raw[n:], strict=True)]

    def put_failures(self, failures: dict[str, dict[str, str]], ttl_s: int) -> None:
        if not failures:
            return
        with map_redis_errors():
            pipe = self.client.pipeline(transaction=False)
            for fp, info in failures.items():
                pipe.set(keys.failure(fp), json.dumps(info), ex=ttl_s)
            pipe.execute()

    def acquire(self, names: list[str], owner: str, ttl_ms: int) -> list[bool]:
        if not names:
            return []
        with map_redis_errors():
            return [bool(r) for r in self._acquire(keys=names, args=[owner, ttl_ms])]

    def acquire_clearing(self, names: list[str], clear: list[str], owner: str,
                         ttl_ms: int) -> list[bool]:
        # The claims-with-interest script with no interest: one round trip, one script.
        return self.acquire_wanted(names, owner, ttl_ms, {}, 1, clear=clear)

    def acquire_unless(self, names: list[str], present: list[str], owner: str,
                       ttl_ms: int, counted: list[str] | None = None
                       ) -> list[bytes | int | None]:
        check_unless(names, present, counted)
        if not names:
            return []
        with map_redis_errors():
            got = self._acquire_unless(keys=[*names, *present, *(counted or [])],
                                       args=[owner, ttl_ms, len(names)])
        return [r if r is None or isinstance(r, bytes) else int(r) for r in got]

    def holders(self, names: list[str]) -> list[str | None]:
        if not names:
            return []
        with map_redis_errors():
            return [r.decode() if r else None for r in self.client.mget(names)]

    def release(self, names: list[str], owner: str | None = None) -> None:
        if not names:
            return
        with map_redis_errors():
            if owner is None:
                self.client.delete(*names)
            else:
                self._release(keys=names, args=[owner])

    def extend(self, names: list[str], ttl_ms: int) -> None:
        if not names:
            return
        with map_redis_errors():
            self._extend(keys=names, args=[ttl_ms])

    def add_attempts(self, fps: list[str], ttl_s: int) -> list[int]:
        if not fps:
            return []
        with map_redis_errors():
            res = self._add_attempts(keys=[keys.attempts(fp) for fp in fps], args=[ttl_s])
        return [int(n) for n in res]

    def clear_attempts(self, fps: list[str]) -> None:
        if fps:
            with map_redis_errors():
                self.client.delete(*[keys.attempts(fp) for fp in fps])

    def peek_attempts(self, fps: list[str]) -> list[int]:
        if not fps:
            return []
        with map_redis_errors():
            return [int(r or 0) for r in self.client.mget([keys.attempts(fp) for fp in fps])]

    def want(self, wants: dict[str, list[str]], ttl_ms: int) -> None:
        self.acquire_wanted([], "", 1, wants, ttl_ms)

    def unwant(self, wants: dict[str, list[str]]) -> None:
        if not wants:
            return
        with map_redis_errors():
            pipe = self.client.pipeline(transaction=False)
            for fp, callers in wants.items():
                pipe.zrem(keys.interest(fp), *callers)
            pipe.execute()

    def acquire_wanted(self, names: list[str], owner: str, ttl_ms: int,
                       wants: dict[str, list[str]], want_ttl_ms: int,
                       clear: list[str] | None = None) -> list[bool]:
        pairs = [(fp, caller) for fp, callers in wants.items() for caller in callers]
        if not names and not pairs:
            return []
        if clear is not None and len(clear) != len(names):
            raise ValueError("acquire_wanted needs one key to clear per key to acquire")
        with map_redis_errors():
            won = self._acquire_wanted(
                keys=[*names, *(keys.interest(fp) for fp, _ in pairs), *(clear or [])],
                args=[owner, ttl_ms, len(names), max(1, want_ttl_ms),
                      *(caller for _, caller in pairs)],
            )
        return [bool(r) for r in won]

    def drop_unwanted(self, owners: list[tuple[str, str]]) -> list[str]:
        if not owners:
            return []
        names = [keys.STATS]
        for fp, _ in owners:
            names += [keys.interest(fp), keys.claim(fp)]
        with map_redis_errors():
            flags = self._drop_unwanted(keys=names, args=[owner for _, owner in owners])
        return list(dict.fromkeys(fp for (fp, _), f in zip(owners, flags, strict=True) if f))

    def incr(self, counts: dict[str, int]) -> None:
        counts = {k: v for k, v in counts.items() if v}
        if not counts:
            return
        with map_redis_errors():
            self._incr_many(keys=[keys.STATS], args=_flat(counts))

    def record_batch(self, batch: BatchRecord) -> None:
        with map_redis_errors():
            pipe = self.client.pipeline(transaction=False)
            for vectors, ttl_s in batch.vectors:
                _queue_vectors(pipe, vectors, ttl_s)
            if batch.clear_attempts:
                pipe.delete(*[keys.attempts(fp) for fp in batch.clear_attempts])
            if batch.release:
                pipe.delete(*batch.release)
            if batch.done:
                pipe.publish(keys.DONE_CHANNEL, ",".join(batch.done))
            _queue_incr(pipe, {k: v for k, v in batch.counts.items() if v})
            _queue_observe(pipe, batch.observations)
            pipe.execute()

    def counters(self) -> dict[str, int]:
        with map_redis_errors():
            raw = self.client.hgetall(keys.STATS)
        out = {name: 0 for name in COUNTERS}
        out.update({k.decode(): int(v) for k, v in raw.items()})
        return out

    def observe(self, values: dict[str, float]) -> None:
        if not values:
            return
        with map_redis_errors():
            pipe = self.client.pipeline(transaction=False)
            _queue_observe(pipe, values)
            pipe.execute()

    def histograms(self) -> dict[str, HistogramSnapshot]:
        names = list(HISTOGRAMS)
        with map_redis_errors():
            pipe = self.client.pipeline(transaction=False)
            for name in names:
                pipe.hgetall(keys.histogram(name))
            raw = pipe.execute()
        out = {}
        for name, fields in zip(names, raw, strict=True):
            if not fields:
                continue
            got = {k.decode(): v for k, v in fields.items()}
            bounds = HISTOGRAMS[name]
            buckets = tuple(int(got.get(str(i), 0)) for i in range(len(bounds) + 1))
            out[name] = HistogramSnapshot(
                bounds, buckets, float(got.get("sum", 0)), int(got.get("count", 0))
            )
        return out

    def heartbeat(self, worker_id: str, info: dict[str, object], ttl_s: int) -> None:
        with map_redis_errors():
            self.client.set(f"{keys.WORKERS}:{worker_id}", json.dumps(info), ex=ttl_s)

    def live_workers(self) -> dict[str, dict[str, object]]:
        prefix = f"{keys.WORKERS}:"
        with map_redis_errors():
            names = list(self.client.scan_iter(match=prefix + "*", count=100))
            values = self.client.mget(names) if names else []
        return {
            n.decode()[len(prefix):]: json.loads(v) for n, v in zip(names, values, strict=True) if v
        }

    def ping(self) -> None:
        with map_redis_errors():
            self.client.ping()

    def publish_done(self, fps: list[str]) -> None:
        if fps:
            with map_redis_errors():
                self.client.publish(keys.DONE_CHANNEL, ",".join(fps))

    def _start_listening(self) -> None:
        with self._lock:
            if self._listener_thread is not None:
                return
            self._listener_thread = threading.Thread(
                target=self._listen, name="embedq-done-listener", daemon=True
            )
            self._listener_thread.start()

    def _listen(self) -> None:
        """Deliver "done" notifications; reconnect forever. Waiters also poll, so a
        notification lost during a reconnect costs latency, never correctness."""
        while not self._closing.is_set():
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.subscribe(keys.DONE_CHANNEL)
                while not self._closing.is_set():
                    msg = pubsub.get_message(timeout=1.0)
                    if msg and msg.get("type") == "message":
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


def _queue_vectors(pipe: Any, vectors: dict[str, bytes], ttl_s: int) -> None:
    for fp, blob in vectors.items():
        pipe.set(keys.vector(fp), blob, ex=ttl_s)


def _flat(counts: dict[str, int]) -> list[str | int]:
    return [x for kv in counts.items() for x in kv]


def _queue_incr(pipe: Any, counts: dict[str, int]) -> None:
    # EVAL, not the registered script: a pipeline holding one first asks SCRIPT EXISTS, a
    # round trip of its own, and this body is a few dozen bytes.
    if counts:
        pipe.eval(_INCR_MANY, 1, keys.STATS, *_flat(counts))


def _queue_observe(pipe: Any, values: dict[str, float]) -> None:
    for name, value in values.items():
        key = keys.histogram(name)
        pipe.hincrby(key, str(bucket_index(name, value)), 1)
        pipe.hincrbyfloat(key, "sum", float(value))
        pipe.hincrby(key, "count", 1)
