"""Queue depth as the API reads it: the deployment's probe (the broker's count, or the
embedded batcher's backlog), with the online depth cached for `TTL_S` so the hot path does
not pay a broker round trip per request (`QueueDepth.online()`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from embedq.config import Settings
from embedq.errors import BrokerUnavailable

log = logging.getLogger("embedq.api")

TTL_S = 0.25
STALE_S = 1.0


class QueueDepth:
    def __init__(self, probe: Callable[[str], int], settings: Settings) -> None:
        self.probe = probe
        self.settings = settings
        self._value = 0
        self._at = float("-inf")
        self._refresh: asyncio.Future[int] | None = None

    def probe_all(self) -> dict[str, int]:
        queues = self.settings.queue
        return {q: self.probe(q) for q in (queues.online_queue, queues.bulk_queue)}

    async def online(self) -> int:
        """The online queue's depth, at most TTL_S old, or at most STALE_S old while a
        fresher reading is on its way; the last value if the probe fails.

        Under steady traffic no request waits for the broker: a reading past TTL_S starts
        a refresh in the background and the request goes on with it (a request waiting
        for the probe cost the sequential one-text request several ms, a probe run on a
        busy 2-core machine). A reading past STALE_S is awaited: after a quiet spell the
        first request sees the queue as it is now.
        """
        loop = asyncio.get_running_loop()
        age = loop.time() - self._at
        if age <= TTL_S:
            return self._value
        refresh = self._refresh
        if refresh is None:
            refresh = self._refresh = loop.run_in_executor(None, self._probe_online)
            refresh.add_done_callback(self._refreshed)
        if age <= STALE_S:
            return self._value
        with contextlib.suppress(BrokerUnavailable):
            await asyncio.shield(refresh)
        return self._value

    def _refreshed(self, refresh: asyncio.Future[int]) -> None:
        try:
            self._value = refresh.result()
        except BrokerUnavailable as exc:
            # The request itself will meet the broker error if it needs the broker; a
            # request answered from cache should not fail on a depth reading.
            log.warning("queue depth unknown: %s", exc)
        finally:
            if self._refresh is refresh:
                self._refresh = None
                self._at = asyncio.get_running_loop().time()

    def _probe_online(self) -> int:
        started = time.perf_counter()
        depth = self.probe(self.settings.queue.online_queue)
        log.debug("online depth %d read in %.1f ms", depth, (time.perf_counter() - started) * 1e3)
        return depth
