"""Queue depth as the API reads it: the deployment's probe (the broker's count, or the
embedded batcher's backlog), with the online depth cached for `TTL_S` so the hot path does
not pay a broker round trip per request (`QueueDepth.online()`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from embedq.config import Settings
from embedq.errors import BrokerUnavailable

log = logging.getLogger("embedq.api")

TTL_S = 0.25


class QueueDepth:
    def __init__(self, probe: Callable[[str], int], settings: Settings) -> None:
        self.probe = probe
        self.settings = settings
        self._value = 0
        self._at = float("-inf")
        self._refresh: asyncio.Future[int] | None = None

    def probe_all(self) -> dict[str, int]:
        return {q: self.probe(q) for q in (self.settings.online_queue, self.settings.bulk_queue)}

    async def online(self) -> int:
        """The online queue's depth, at most TTL_S old; the last value if the probe fails."""
        loop = asyncio.get_running_loop()
        if loop.time() - self._at <= TTL_S:
            return self._value
        if self._refresh is None:
            self._refresh = loop.run_in_executor(None, self._probe_online)
        refresh = self._refresh
        try:
            self._value = await asyncio.shield(refresh)
        except BrokerUnavailable as exc:
            # The request itself will meet the broker error if it needs the broker; a
            # request answered from cache should not fail on a depth reading.
            log.warning("queue depth unknown: %s", exc)
        finally:
            if self._refresh is refresh:
                self._refresh = None
                self._at = loop.time()
        return self._value

    def _probe_online(self) -> int:
        started = time.perf_counter()
        depth = self.probe(self.settings.online_queue)
        log.debug("online depth %d read in %.1f ms", depth, (time.perf_counter() - started) * 1e3)
        return depth
