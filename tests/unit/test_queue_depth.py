"""The API's online queue depth: never a broker round trip on a request under steady
traffic, and a fresh reading after a quiet spell."""

from __future__ import annotations

import asyncio
import threading

from embedq.api import depth
from embedq.api.depth import QueueDepth
from embedq.config import Settings


class Probe:
    """A broker count that answers only when released, so a test sees who waited."""

    def __init__(self) -> None:
        self.value = 0
        self.calls = 0
        self.release = threading.Event()

    def __call__(self, queue: str) -> int:
        self.calls += 1
        self.release.wait(5)
        return self.value


def test_a_stale_reading_is_served_while_the_refresh_runs_in_the_background() -> None:
    async def scenario() -> None:
        probe = Probe()
        reader = QueueDepth(probe, Settings())
        probe.value, probe.release = 3, _set()
        assert await reader.online() == 3  # the first reading is awaited
        probe.value, probe.release = 7, threading.Event()
        reader._at -= depth.TTL_S + 0.01  # past the ttl, within STALE_S
        assert await asyncio.wait_for(reader.online(), 1) == 3  # not waiting on the probe
        assert reader._refresh is not None  # the refresh runs in the background
        probe.release.set()
        for _ in range(200):
            if reader._refresh is None:
                break
            await asyncio.sleep(0.01)
        assert probe.calls == 2
        assert await reader.online() == 7

    asyncio.run(scenario())


def test_a_reading_past_the_stale_limit_is_awaited() -> None:
    async def scenario() -> None:
        probe = Probe()
        reader = QueueDepth(probe, Settings())
        probe.value, probe.release = 1, _set()
        assert await reader.online() == 1
        probe.value = 5
        reader._at -= depth.STALE_S + 0.01
        assert await reader.online() == 5

    asyncio.run(scenario())


def _set() -> threading.Event:
    event = threading.Event()
    event.set()
    return event
