"""`unless_disconnected` (embedq/api/disconnect.py): the work's result, or None once the
client is gone (the work then cancelled), and the caller's own task left as it was."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from starlette.requests import Request
from starlette.types import Message

from embedq.api.disconnect import unless_disconnected


class Client:
    """The server side of a request whose body was read: `receive` waits until `leave`."""

    def __init__(self, fail: bool = False) -> None:
        self.left = asyncio.Event()
        self.fail = fail

    async def receive(self) -> Message:
        await self.left.wait()
        if self.fail:
            raise OSError("the connection broke")
        return {"type": "http.disconnect"}

    def request(self) -> Request:
        scope: dict[str, Any] = {"type": "http", "method": "POST", "path": "/", "headers": []}
        return Request(scope, self.receive)


class Work:
    """Work that ends when `finish` is called; says whether it was cancelled."""

    def __init__(self) -> None:
        self.finish = asyncio.Event()
        self.cancelled = False

    async def run(self) -> str:
        try:
            await self.finish.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return "vectors"


def others() -> set[asyncio.Task[Any]]:
    return asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[operator]


def test_the_result_when_the_work_ends_first() -> None:
    async def go() -> None:
        client, work = Client(), Work()
        asyncio.get_running_loop().call_soon(work.finish.set)
        assert await unless_disconnected(client.request(), work.run()) == "vectors"
        client.left.set()  # a disconnect after the answer changes nothing
        await asyncio.sleep(0.01)
        assert not work.cancelled and not others()
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]

    asyncio.run(go())


@pytest.mark.parametrize("fail", [False, True], ids=["disconnect", "receive-fails"])
def test_none_and_the_work_cancelled_when_the_client_leaves_first(fail: bool) -> None:
    async def go() -> None:
        client, work = Client(fail=fail), Work()
        asyncio.get_running_loop().call_later(0.01, client.left.set)
        assert await unless_disconnected(client.request(), work.run()) is None
        assert work.cancelled
        me = asyncio.current_task()
        assert me is not None and me.cancelling() == 0
        await asyncio.sleep(0.01)  # the caller's task goes on, uncancelled
        assert not others()

    asyncio.run(go())


@pytest.mark.parametrize("disconnect_too", [False, True], ids=["alone", "with-a-disconnect"])
def test_a_cancellation_from_outside_goes_through(disconnect_too: bool) -> None:
    async def go() -> None:
        client, work = Client(), Work()
        caller = asyncio.ensure_future(unless_disconnected(client.request(), work.run()))
        await asyncio.sleep(0.01)
        if disconnect_too:
            client.left.set()
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert work.cancelled and not others()

    asyncio.run(go())


def test_a_disconnect_in_the_same_turn_as_the_answer_leaves_the_caller_alone() -> None:
    async def go() -> None:
        client, work = Client(), Work()

        def both() -> None:  # the watcher wakes first, the caller in the same turn
            client.left.set()
            work.finish.set()

        asyncio.get_running_loop().call_soon(both)
        assert await unless_disconnected(client.request(), work.run()) == "vectors"
        await asyncio.sleep(0.01)  # not cancelled later by the watcher's late callback
        me = asyncio.current_task()
        assert me is not None and me.cancelling() == 0 and not others()

    asyncio.run(go())
