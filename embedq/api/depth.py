"""Queue depth: messages waiting on the broker, read the way the broker itself reports it.

On a real broker the depth of a queue is what a passive `queue_declare` returns (Redis:
LLEN over the queue's priority lists; RabbitMQ: the queue's message count). In embedded
mode the broker is in-process and the depth is the embedded batcher's backlog. The sync
route reads the online depth through `QueueDepth.online()`, cached for `TTL_S`, so the hot
path does not pay a broker round trip per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from kombu.exceptions import ChannelError
from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import RedisError

from embedq.errors import BrokerUnavailable
from embedq.service import EmbeddingService

log = logging.getLogger("embedq.api")

TTL_S = 0.25


class QueueDepth:
    def __init__(self, service: EmbeddingService) -> None:
        self.service = service
        self.settings = service.settings
        self._value = 0
        self._at = float("-inf")
        self._refresh: asyncio.Future[int] | None = None

    def probe(self, queue: str) -> int:
        """Messages waiting in `queue` now; BrokerUnavailable when the broker is down."""
        if self.settings.embedded:
            from embedq.workers.embedded import ensure_embedded_worker

            # Started by the service already; this returns that worker's runtime.
            runtime = ensure_embedded_worker(self.service.app, self.settings)
            return runtime.batcher.depth() if queue == self.settings.online_queue else 0
        try:
            with self.service.app.pool.acquire(block=True, timeout=5) as conn:
                channel = conn.channel()
                try:
                    _, count, _ = channel.queue_declare(queue=queue, passive=True)
                except (ChannelError, *conn.channel_errors):
                    return 0  # no such queue yet: nothing was ever queued on it
                finally:
                    with contextlib.suppress(Exception):  # RabbitMQ closed it on NOT_FOUND
                        channel.close()
                return int(count)
        except (KombuOperationalError, OSError, RedisError) as exc:
            raise BrokerUnavailable(f"the broker is unreachable ({exc}); retry shortly") from exc

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
