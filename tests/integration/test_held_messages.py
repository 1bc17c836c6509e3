"""A Redis channel holds at most its limit of a queue's unacknowledged messages
(`redis_transport.HELD_LIMITS`): at the limit its BRPOP leaves the queue out, so the next
message stays in Redis for another consumer, and it takes one again once it acks one.
Workers hold two of a bulk queue this way (tests/integration/test_job_waves.py shows it
on a job's wave); here the transport itself, on a real Redis."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from kombu import Connection, Consumer, Producer

from embedq.tasks.app import queue
from embedq.tasks.redis_transport import HELD_LIMITS, TRANSPORT
from tests.support import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def name(redis_url: str) -> Iterator[str]:
    name = f"held-{uuid.uuid4().hex[:8]}"
    yield name
    redis.Redis.from_url(redis_url).delete(name)


def consume(redis_url: str, name: str, limits: dict[str, int], got: list[Any],
            messages: int = 3, **options: Any) -> tuple[Connection, Consumer]:
    """A consumer of `name` (prefetch 32) under `limits`, after `messages` were published
    there; `options` are more transport options."""
    conn = Connection(redis_url, transport=TRANSPORT,
                      transport_options={HELD_LIMITS: limits, **options})
    producer = Producer(conn.default_channel)
    for n in range(messages):
        producer.publish({"n": n}, exchange=queue(name).exchange, routing_key=name,
                         declare=[queue(name)], serializer="json")
    consumer = Consumer(conn, queues=[queue(name)], accept=["json"],
                        callbacks=[lambda _body, message: got.append(message)])
    consumer.qos(prefetch_count=32)
    return conn, consumer


def test_a_channel_at_its_limit_leaves_the_rest_on_the_queue(redis_url: str,
                                                             name: str) -> None:
    got: list[Any] = []
    conn, consumer = consume(redis_url, name, {name: 2}, got)
    depth = redis.Redis.from_url(redis_url)
    try:
        with consumer:
            conn.drain_events(timeout=5)
            conn.drain_events(timeout=5)
            assert len(got) == 2
            # At its limit the third message stays in Redis, however long it waits.
            with pytest.raises(socket.timeout):
                conn.drain_events(timeout=2.5)
            assert len(got) == 2 and depth.llen(name) == 1
            got[0].ack()
            conn.drain_events(timeout=5)  # room again: taken at the next BRPOP
            assert len(got) == 3 and depth.llen(name) == 0
            for message in got[1:]:
                message.ack()
    finally:
        conn.release()
        depth.close()


def test_without_a_limit_the_prefetch_alone_bounds_a_channel(redis_url: str,
                                                             name: str) -> None:
    got: list[Any] = []
    conn, consumer = consume(redis_url, name, {}, got)
    try:
        with consumer:
            for _ in range(3):
                conn.drain_events(timeout=5)
            assert len(got) == 3
            for message in got:
                message.ack()
    finally:
        conn.release()


def test_an_ack_wakes_a_brpop_that_left_the_queue_out(redis_url: str, name: str) -> None:
    """At its limit the channel still waits on its other queues (a worker's online queue);
    the ack that gives it room wakes that BRPOP, so the next message comes at once, not
    when the BRPOP times out (10 s here)."""
    other = f"{name}-other"
    got: list[Any] = []
    conn = Connection(redis_url, transport=TRANSPORT,
                      transport_options={HELD_LIMITS: {name: 2}})
    conn.transport.brpop_timeout = 10  # read by each channel from its transport (kombu: 1)
    producer = Producer(conn.default_channel)
    for n in range(3):
        producer.publish({"n": n}, exchange=queue(name).exchange, routing_key=name,
                         declare=[queue(name), queue(other)], serializer="json")
    consumer = Consumer(conn, queues=[queue(name), queue(other)], accept=["json"],
                        callbacks=[lambda _body, message: got.append(message)])
    consumer.qos(prefetch_count=32)
    failed: list[BaseException] = []

    def drain() -> None:
        try:
            conn.drain_events(timeout=15)
        except BaseException as exc:  # handed to the test
            failed.append(exc)

    try:
        with consumer:
            conn.drain_events(timeout=5)
            conn.drain_events(timeout=5)
            assert len(got) == 2
            waiter = threading.Thread(target=drain, daemon=True)
            waiter.start()
            channel = conn.default_channel
            wait_until(lambda: bool(channel.held_back) and bool(channel._in_poll), 10,
                       "a BRPOP leaving the full queue out")
            assert len(got) == 2
            acked = time.monotonic()
            got[0].ack()
            waiter.join(timeout=15)
            took = time.monotonic() - acked
            assert not failed and len(got) == 3, failed
            assert took < 5, f"the third message came {took:.1f} s after the ack"
            for message in got[1:]:
                message.ack()
    finally:
        conn.release()
        redis.Redis.from_url(redis_url).delete(other)
