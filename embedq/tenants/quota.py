"""Per-key texts a day: one counter per key per UTC day, in Redis, shared by every API
process (one Lua script checks and adds atomically), or in this process when there is no
Redis (embedded mode: there is one process).

A request brings `n` texts; it is admitted when the day's count plus `n` stays within the
key's `texts_per_day`, and then counted. One that would pass it is refused whole
(DailyLimitReached, Retry-After: the seconds until the next UTC day) and counts nothing,
so a refused request never eats into the day's allowance.
"""

from __future__ import annotations

import math
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from redis.exceptions import RedisClusterException, RedisError

from embedq.coordination import layout
from embedq.errors import BrokerUnavailable, DailyLimitReached
from embedq.tenants.principal import Principal

_CHARGE = """
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local n = tonumber(ARGV[1])
if used + n > tonumber(ARGV[2]) then return {0, used} end
used = redis.call('INCRBY', KEYS[1], n)
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return {1, used}
"""

DAY_S = 86_400


def utc_day(now: datetime) -> tuple[str, int]:
    """The UTC day of `now` (YYYY-MM-DD) and the whole seconds until the next one."""
    now = now.astimezone(UTC)
    tomorrow = datetime(now.year, now.month, now.day, tzinfo=UTC) + timedelta(days=1)
    return now.strftime("%Y-%m-%d"), max(1, math.ceil((tomorrow - now).total_seconds()))


class TextQuota:
    def __init__(self, client: Any | None) -> None:
        """`client`: a redis-py client; None keeps the counters in this process."""
        self._charge = client.register_script(_CHARGE) if client is not None else None
        self._lock = threading.Lock()
        self._local: dict[tuple[str, str], int] = {}

    def charge(self, principal: Principal, texts: int, now: datetime | None = None) -> None:
        """Count `texts` against the key's texts today; DailyLimitReached (nothing
        counted) when they would pass `principal.texts_per_day`."""
        limit = principal.texts_per_day
        if limit is None or texts <= 0:
            return
        day, left_s = utc_day(now or datetime.now(UTC))
        key = (principal.limiter_id, day)
        if self._charge is not None:
            admitted, used = self._charge_redis(layout.daily_texts(*key), texts, limit,
                                                left_s + DAY_S)
        else:
            admitted, used = self._charge_local(key, texts, limit)
        if not admitted:
            raise DailyLimitReached(
                f"the key {principal.key_name!r} is limited to {limit} texts a day (UTC) and "
                f"has sent {used} today, so these {texts} would pass it: retry after "
                f"{left_s} s (the next UTC day), send fewer texts, or ask for a key with a "
                "higher limit (`embedq keys create --texts-per-day N`)",
                retry_after_s=left_s)

    def _charge_redis(self, key: str, texts: int, limit: int, ttl_s: int) -> tuple[bool, int]:
        assert self._charge is not None
        try:
            admitted, used = self._charge(keys=[key], args=[texts, limit, ttl_s])
        except (RedisError, RedisClusterException) as exc:
            raise BrokerUnavailable(f"the daily text limit cannot be checked: Redis is "
                                    f"unreachable ({exc.__class__.__name__}); retry "
                                    "shortly") from exc
        return bool(int(admitted)), int(used)

    def _charge_local(self, key: tuple[str, str], texts: int, limit: int) -> tuple[bool, int]:
        with self._lock:
            for old in [k for k in self._local if k[1] != key[1]]:
                del self._local[old]  # earlier days
            used = self._local.get(key, 0)
            if used + texts > limit:
                return False, used
            self._local[key] = used + texts
            return True, used + texts
