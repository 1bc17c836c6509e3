"""Per-key request rate limits: a token bucket per key, in Redis, shared by every API
process (one Lua script refills and takes a token atomically, on Redis's clock), or in
this process when there is no Redis (embedded mode: there is one process).

A key with `rate_per_s` r holds up to max(1, r) tokens (one second's worth of burst);
each request takes one. An empty bucket raises RateLimited with Retry-After: the
seconds until the next token, rounded up.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from redis.exceptions import RedisClusterException, RedisError

from embedq.coordination import layout
from embedq.errors import BrokerUnavailable, RateLimited
from embedq.tenants.principal import Principal

_TAKE = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = (1 - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return tostring(wait)
"""


class RateLimiter:
    def __init__(self, client: Any | None) -> None:
        """`client`: a redis-py client; None keeps the buckets in this process."""
        self.client = client
        self._take = client.register_script(_TAKE) if client is not None else None
        self._lock = threading.Lock()
        self._local: dict[str, tuple[float, float]] = {}

    def check(self, principal: Principal) -> None:
        """Take one token of the caller's bucket; RateLimited when it is empty."""
        rate = principal.rate_per_s
        if rate is None:
            return
        burst = max(1.0, rate)
        wait = (self._take_redis(principal.limiter_id, rate, burst) if self._take is not None
                else self._take_local(principal.limiter_id, rate, burst))
        if wait > 0:
            raise RateLimited(
                f"the key {principal.key_name!r} is limited to {rate:g} requests a second: "
                f"retry after {math.ceil(wait)} s, or ask for a higher limit (a key made "
                "with `embedq keys create --rate N`)", retry_after_s=max(1, math.ceil(wait)))

    def _take_redis(self, limiter_id: str, rate: float, burst: float) -> float:
        assert self._take is not None
        try:
            return float(self._take(keys=[layout.rate_bucket(limiter_id)], args=[rate, burst]))
        except (RedisError, RedisClusterException) as exc:
            raise BrokerUnavailable(f"the rate limit cannot be checked: Redis is unreachable "
                                    f"({exc.__class__.__name__}); retry shortly") from exc

    def _take_local(self, limiter_id: str, rate: float, burst: float) -> float:
        now = time.monotonic()
        with self._lock:
            tokens, at = self._local.get(limiter_id, (burst, now))
            tokens = min(burst, tokens + max(0.0, now - at) * rate)
            wait = 0.0
            if tokens >= 1:
                tokens -= 1
            else:
                wait = (1 - tokens) / rate
            self._local[limiter_id] = (tokens, now)
        return wait
