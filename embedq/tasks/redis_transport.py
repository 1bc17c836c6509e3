"""kombu's Redis transport, with two fixes: a consumer that loses Redis while it holds
unacknowledged messages survives the reconnect, and a message popped while Redis is out
of memory is run instead of dropped (`QoS`).

kombu 5.7 / Celery 5.7: on a lost link Celery calls `Connection.collect()`, whose channel
close can fail half-way (the BRPOP read raises while Redis is down) and which then detaches
the transport from its connection (`transport.client = None`). Two calls then build a Redis
client from the detached transport and raise AttributeError, which Celery treats as an
"Unrecoverable error" and the worker stops: the `close()` that follows, putting the
channel's unacked messages back, and, after the reconnect, the ack of each task that was
still running on the old channel.

A channel detached from its transport leaves its unacked messages alone instead: they stay
in Redis's unacked hash, and the visibility sweep (`visibility_timeout` +
`unacked_restore_interval`) returns them to their queue, as for a worker that was killed.
A task that finished meanwhile is then delivered again and answered from the durable tier.
"""

from __future__ import annotations

import logging
from typing import Any

from kombu.transport import redis, virtual
from redis import exceptions as redis_exceptions

from embedq.cache.redis_hot import out_of_memory

log = logging.getLogger(__name__)


class QoS(redis.QoS):  # type: ignore[misc]
    """kombu's QoS, with one fix: a message popped while Redis is out of memory runs.

    kombu pops a message (BRPOP, which Redis allows at maxmemory: it frees memory) and
    then records it as unacknowledged (ZADD + HSET, which Redis refuses then). kombu lets
    that refusal escape, and the popped message is dropped: no copy is left anywhere. Here
    the message is delivered without its record instead: it runs and is acked as usual;
    only a worker that dies while running it loses it, and the claim's ttl (online) or
    beat's stall rescue (jobs) bounds what that costs (docs/operations.md)."""

    def append(self, message: Any, delivery_tag: Any) -> None:
        try:
            super().append(message, delivery_tag)  # type: ignore[no-untyped-call]
        except redis_exceptions.RedisError as exc:
            if not out_of_memory(exc):
                raise
            log.warning("Redis is out of memory: message %s runs without its redelivery "
                        "record (it was popped already; refusing it would lose it)",
                        delivery_tag)
            virtual.QoS.append(self, message, delivery_tag)  # type: ignore[no-untyped-call]


class Channel(redis.Channel):  # type: ignore[misc]
    QoS = QoS

    def _detached(self) -> bool:
        return getattr(self.connection, "client", None) is None

    def close(self) -> None:
        if self._detached():
            self.do_restore = False
        super().close()  # type: ignore[no-untyped-call]

    def basic_ack(self, delivery_tag: Any, multiple: bool = False) -> None:
        if self._detached():
            log.info("message %s finished after its broker link was lost; the visibility "
                     "sweep will deliver it again (answered from the durable tier)",
                     delivery_tag)
            return
        super().basic_ack(delivery_tag, multiple)  # type: ignore[no-untyped-call]

    def basic_reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        if self._detached():
            return  # the visibility sweep requeues it
        super().basic_reject(delivery_tag, requeue)  # type: ignore[no-untyped-call]


class Transport(redis.Transport):  # type: ignore[misc]
    Channel = Channel


TRANSPORT = f"{__name__}:Transport"

__all__ = ["TRANSPORT", "Channel", "QoS", "Transport"]
