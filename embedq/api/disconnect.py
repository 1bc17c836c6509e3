"""Noticing a client that disconnects while its request waits for the service.

uvicorn does not cancel a handler whose client went away: the handler would wait for its
vectors until the request timeout, and the work would be encoded for nobody. Once the
body is read, the next ASGI message a request can receive is `http.disconnect` (or none
until the response is sent), so one task waiting for it is enough to notice.
`embed_for_caller` is the one call both embedding route families make through it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from fastapi import Request

from embedq.api.auth import admit_texts, tenant_of
from embedq.api.coalescing import RequestCoalescer
from embedq.service import Outcome

T = TypeVar("T")

# What the access log and the request metrics record for a request whose client left
# before its answer (nginx's "client closed request"); the client never sees it.
CLIENT_CLOSED = 499


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T | None:
    """`work`'s result, or None when the client disconnects first; `work` is then
    cancelled (a request waiting in the RequestCoalescer leaves its call, so what no other
    caller wants is not encoded). Call it after the body was read.

    `work` runs in the caller's own task; one watcher task waits for the disconnect and
    cancels the caller's task when it comes (a task of its own for `work` and a wait on
    both cost a request a tenth of its CPU on the event loop)."""
    me = asyncio.current_task()
    assert me is not None
    gone = over = False

    def leave(watch: asyncio.Task[None]) -> None:
        nonlocal gone
        if watch.cancelled() or over:
            return
        watch.exception()  # retrieved: a receive that failed counts as the client gone
        gone = True
        me.cancel()

    watch = asyncio.ensure_future(_disconnected(request))
    watch.add_done_callback(leave)
    try:
        return await work
    except asyncio.CancelledError:
        if not gone or me.uncancel() > 0:
            raise  # cancelled from outside (the server stopping), not by the watcher
        return None
    finally:
        over = True  # a disconnect seen after this changes nothing
        watch.remove_done_callback(leave)
        watch.cancel()


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def embed_for_caller(request: Request, batcher: RequestCoalescer, texts: list[str],
                           dimensions: int | None, normalize: bool | None = None,
                           precision: str | None = None,
                           model: str | None = None,
                           tokens: list[int] | None = None) -> list[Outcome] | None:
    """Count the texts for the caller (audit line, its key's texts a day), then embed them
    as its tenant: the outcomes, or None when the client disconnected first. `tokens`:
    each text's token count, already counted for the limits."""
    await admit_texts(request, len(texts))
    return await unless_disconnected(
        request, batcher.embed(texts, dimensions, normalize, precision,
                               tenant=tenant_of(request), model=model, tokens=tokens))
