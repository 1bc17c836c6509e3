"""kombu's Redis transport, with two fixes: a consumer that loses Redis while it holds
unacknowledged messages survives the reconnect, and one whose Redis is out of memory
keeps running and loses no message (`QoS`).

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
A task that finished meanwhile is then delivered again and answered from the durable store.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kombu.transport import redis, virtual
from redis import exceptions as redis_exceptions

from embedq.coordination.redis_link import out_of_memory

log = logging.getLogger(__name__)


class QoS(redis.QoS):  # type: ignore[misc]
    """kombu's QoS, made to survive Redis out of memory (maxmemory with noeviction, which
    refuses every write and every command inside MULTI, deletions included):

    - acks and rejects remove their record with a plain pipeline (ZREM + HDEL, which
      Redis allows at maxmemory: they free memory), not a MULTI, which Redis refuses
      whole; kombu's ack failed there, and the worker stopped ("Unrecoverable error"),
      holding the restore sweep's mutex when it died mid-sweep;
    - a message popped then (BRPOP is allowed) whose unacknowledged record Redis refuses
      (ZADD + HSET) runs without its record instead of being dropped: only a worker that
      dies while running it loses it, and the claim's ttl (online) or beat's stall rescue
      (jobs) bounds what that costs (docs/operations.md);
    - a restore sweep that Redis refuses (its mutex, its requeue) waits for the next one.
    """

    @contextmanager
    def pipe_or_acquire(self, pipe: Any = None, client: Any = None) -> Iterator[Any]:
        if pipe:
            yield pipe
        else:
            with self.channel.conn_or_acquire(client) as client:
                yield client.pipeline(transaction=False)

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

    def restore_visible(self, *args: Any, **kwargs: Any) -> None:
        try:
            super().restore_visible(*args, **kwargs)  # type: ignore[no-untyped-call]
        except redis_exceptions.RedisError as exc:
            if not out_of_memory(exc):
                raise
            log.warning("Redis is out of memory: unacknowledged messages are restored by a "
                        "later sweep, once it takes writes again")


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
                     "sweep will deliver it again (answered from the durable store)",
                     delivery_tag)
            return
        super().basic_ack(delivery_tag, multiple)  # type: ignore[no-untyped-call]

    def basic_reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        if self._detached():
            return  # the visibility sweep requeues it
        try:
            super().basic_reject(delivery_tag, requeue)  # type: ignore[no-untyped-call]
        except redis_exceptions.RedisError as exc:
            if not (requeue and out_of_memory(exc)):
                raise
            # The requeue (a MULTI with LPUSH) is refused whole: the message keeps its
            # unacknowledged record, and the visibility sweep requeues it later.
            log.warning("Redis is out of memory: message %s stays unacknowledged; the "
                        "visibility sweep puts it back once Redis takes writes", delivery_tag)


class Transport(redis.Transport):  # type: ignore[misc]
    Channel = Channel


TRANSPORT = f"{__name__}:Transport"

__all__ = ["TRANSPORT", "Channel", "QoS", "Transport"]
