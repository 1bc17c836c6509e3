"""In-process single flight on asyncio futures, in front of the cross-process claim.

`run_many(keys, compute)` makes each key computed at most once at a time in this process:
the first caller leads (its `compute` runs as a task of its own), later callers await the
same future. A waiter that is cancelled stops waiting, never the computation others wait
on (`asyncio.shield`). A leader's failure reaches every waiter once, as a value, and is
logged once with the number of waiters it reached, not as N stack traces.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

log = logging.getLogger("embedq.singleflight")

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

Compute = Callable[[list[K]], Awaitable[dict[K, V | BaseException]]]


@dataclass
class _Flight(Generic[V]):
    future: asyncio.Future[V | BaseException]
    waiters: int = 0


@dataclass
class SingleFlight(Generic[K, V]):
    name: str = "embed"
    _flights: dict[K, _Flight[V]] = field(default_factory=dict)
    _leaders: set[asyncio.Task[None]] = field(default_factory=set)
    led: int = 0
    joined: int = 0

    def in_flight(self) -> int:
        return len(self._flights)

    async def run_many(self, keys: list[K], compute: Compute[K, V]) -> list[V | BaseException]:
        """One result per key, in order: the value, or the exception its computation hit."""
        loop = asyncio.get_running_loop()
        lead = [k for k in dict.fromkeys(keys) if k not in self._flights]
        for key in lead:
            self._flights[key] = _Flight(loop.create_future())
        flights = [self._flights[k] for k in keys]
        for flight in flights:
            flight.waiters += 1
        self.led += len(lead)
        self.joined += len(keys) - len(lead)
        if lead:
            task = loop.create_task(self._lead(lead, compute))
            self._leaders.add(task)
            task.add_done_callback(self._leaders.discard)
        try:
            return [await asyncio.shield(f.future) for f in flights]
        finally:
            for flight in flights:
                flight.waiters -= 1

    async def _lead(self, keys: list[K], compute: Compute[K, V]) -> None:
        try:
            results = await compute(keys)
        except Exception as exc:
            results = {k: exc for k in keys}
        failures: dict[str, int] = {}
        for key in keys:
            flight = self._flights.pop(key)
            outcome = results.get(key, LookupError(f"no result computed for {key!r}"))
            if isinstance(outcome, BaseException):
                msg = f"{type(outcome).__name__}: {outcome}"
                failures[msg] = failures.get(msg, 0) + flight.waiters
            flight.future.set_result(outcome)
        for msg, waiters in failures.items():
            log.warning("%s leader failed (shared by %d waiters): %s", self.name, waiters, msg)
