"""A requeue Redis refuses for lack of memory loses no message and leaves no hold behind
(`redis_transport.QoS.reject`), on a Redis of the test's own set to refuse every write.

A task that meets the outage and cannot publish its retry is requeued; Redis refuses
that too. The channel then drops its hold on the message, or the queue's held limit would
stay full and the worker would never take that queue again; the message comes back once
Redis takes writes: from its unacknowledged record by the visibility sweep, or, popped
during the outage without a record, from the copy the channel parked."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from kombu import Connection, Consumer

from tests.faults.procs import RedisServer
from tests.integration.test_held_messages import consume

pytestmark = pytest.mark.integration

NAME = "oom-requeue"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    own = RedisServer(tmp_path / "redis").start()
    try:
        yield own
    finally:
        own.stop()


def connect(url: str, got: list[Any]) -> tuple[Connection, Consumer]:
    return consume(url, NAME, {NAME: 2}, got, messages=2, visibility_timeout=1)


def held(conn: Connection) -> int:
    return int(conn.default_channel.qos.held()[NAME])


def test_a_message_popped_during_the_outage_is_parked_and_pushed_back(
        server: RedisServer) -> None:
    got: list[Any] = []
    conn, consumer = connect(server.url, got)
    depth = redis.Redis.from_url(server.url)
    try:
        with consumer:
            server.set_maxmemory("1")
            conn.drain_events(timeout=5)  # popped; its record refused
            assert len(got) == 1 and held(conn) == 1
            got[0].reject(requeue=True)  # refused too: parked, the hold dropped
            assert held(conn) == 0 and depth.llen(NAME) == 1
            conn.default_channel.qos.restore_visible()  # still refused: stays parked
            assert depth.llen(NAME) == 1 and conn.default_channel.qos.parked
            server.set_maxmemory("0")
            conn.default_channel.qos.restore_visible()  # the sweep's tick pushes it back
            assert depth.llen(NAME) == 2 and not conn.default_channel.qos.parked
            conn.drain_events(timeout=5)
            conn.drain_events(timeout=5)
            bodies = sorted(message.payload["n"] for message in got[1:])
            assert bodies == [0, 1], bodies
            assert any(message.delivery_info.get("redelivered") for message in got[1:])
            for message in got[1:]:
                message.ack()
            assert held(conn) == 0 and depth.llen(NAME) == 0
    finally:
        conn.release()
        depth.close()


def test_a_recorded_message_whose_requeue_is_refused_comes_back_by_the_sweep(
        server: RedisServer) -> None:
    got: list[Any] = []
    conn, consumer = connect(server.url, got)
    depth = redis.Redis.from_url(server.url)
    try:
        with consumer:
            conn.drain_events(timeout=5)  # popped with its record
            server.set_maxmemory("1")
            got[0].reject(requeue=True)  # the requeue's MULTI refused
            assert held(conn) == 0 and depth.llen(NAME) == 1
            assert depth.hlen("unacked") == 1  # the record stays for the sweep
            server.set_maxmemory("0")
            # The sweep's ticks put it back once it is past the visibility timeout (1 s).
            deadline = time.monotonic() + 10
            while depth.llen(NAME) < 2 and time.monotonic() < deadline:
                conn.default_channel.qos.restore_visible(interval=1)
                time.sleep(0.1)
            assert depth.llen(NAME) == 2 and depth.hlen("unacked") == 0
            conn.drain_events(timeout=5)
            conn.drain_events(timeout=5)
            assert sorted(message.payload["n"] for message in got[1:]) == [0, 1]
            for message in got[1:]:
                message.ack()
    finally:
        conn.release()
        depth.close()
