"""Queue depth: messages waiting on the broker, read the way the broker itself reports it.

The depth of a queue is what a passive `queue_declare` returns (Redis: LLEN over the
queue's priority lists; RabbitMQ: the queue's message count).
"""

from __future__ import annotations

import contextlib

from celery import Celery
from kombu.exceptions import ChannelError
from redis.exceptions import RedisError

from embedq.errors import BrokerUnavailable
from embedq.tasks.publish import BROKER_ERRORS, broker_error

_ERRORS: tuple[type[BaseException], ...] = (*BROKER_ERRORS, RedisError)


def broker_depth(app: Celery, queue: str) -> int:
    """Messages waiting in `queue` now; BrokerUnavailable when the broker is down."""
    try:
        with app.pool.acquire(block=True, timeout=5) as conn:
            try:
                channel = conn.channel()
            except AttributeError as exc:
                # kombu tore this pooled connection down after a socket timeout on another
                # thread (a silent link); drop its state so the next probe reconnects.
                conn.collect()
                raise BrokerUnavailable("the broker connection was lost; retry shortly") from exc
            try:
                _, count, _ = channel.queue_declare(queue=queue, passive=True)
            except (ChannelError, *conn.channel_errors):
                return 0  # no such queue yet: nothing was ever queued on it
            finally:
                with contextlib.suppress(Exception):  # RabbitMQ closed it on NOT_FOUND
                    channel.close()
            return int(count)
    except _ERRORS as exc:
        raise broker_error(exc) from exc
