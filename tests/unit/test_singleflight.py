"""In-process single flight: one computation per key, shared outcomes, safe cancels."""

from __future__ import annotations

import asyncio
import logging

import pytest

from embedq.singleflight import SingleFlight


def test_concurrent_callers_share_one_computation() -> None:
    calls: list[list[str]] = []

    async def compute(keys: list[str]) -> dict[str, int | BaseException]:
        calls.append(keys)
        await asyncio.sleep(0.05)
        return {k: len(k) for k in keys}

    async def main() -> list[list[int | BaseException]]:
        flights: SingleFlight[str, int] = SingleFlight()
        return await asyncio.gather(*[flights.run_many(["aa", "bbb"], compute)
                                      for _ in range(20)])

    results = asyncio.run(main())
    assert results == [[2, 3]] * 20
    assert calls == [["aa", "bbb"]]


def test_a_cancelled_waiter_never_cancels_the_computation() -> None:
    finished = asyncio.Event

    async def main() -> tuple[list[int | BaseException], bool]:
        done = finished()

        async def compute(keys: list[str]) -> dict[str, int | BaseException]:
            await asyncio.sleep(0.1)
            done.set()
            return {k: 7 for k in keys}

        flights: SingleFlight[str, int] = SingleFlight()
        first = asyncio.create_task(flights.run_many(["k"], compute))
        await asyncio.sleep(0.01)
        second = asyncio.create_task(flights.run_many(["k"], compute))
        await asyncio.sleep(0.01)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        return await second, done.is_set()

    value, computed = asyncio.run(main())
    assert value == [7] and computed


def test_a_leader_failure_reaches_every_waiter_once_and_logs_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def compute(keys: list[str]) -> dict[str, int | BaseException]:
        await asyncio.sleep(0.05)
        raise RuntimeError("upstream exploded")

    async def main() -> list[list[int | BaseException]]:
        flights: SingleFlight[str, int] = SingleFlight()
        return await asyncio.gather(*[flights.run_many(["x"], compute) for _ in range(10)])

    with caplog.at_level(logging.WARNING, logger="embedq.singleflight"):
        results = asyncio.run(main())
    assert all(isinstance(r[0], RuntimeError) for r in results)
    assert len({id(r[0]) for r in results}) == 1
    lines = [r for r in caplog.records if "leader failed" in r.getMessage()]
    assert len(lines) == 1
    assert "shared by 10 waiters" in lines[0].getMessage()


def test_a_new_call_after_a_failure_computes_again() -> None:
    attempts: list[int] = []

    async def compute(keys: list[str]) -> dict[str, int | BaseException]:
        attempts.append(1)
        if len(attempts) == 1:
            return {k: ValueError("first fails") for k in keys}
        return {k: 1 for k in keys}

    async def main() -> tuple[list[int | BaseException], list[int | BaseException]]:
        flights: SingleFlight[str, int] = SingleFlight()
        first = await flights.run_many(["k"], compute)
        second = await flights.run_many(["k"], compute)
        return first, second

    first, second = asyncio.run(main())
    assert isinstance(first[0], ValueError) and second == [1]
