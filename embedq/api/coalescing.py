"""Server-side coalescing: many small concurrent requests, one service call.

Clients such as Dify's indexer send one to a few texts per request, many requests at
once. Each request hands its texts to the `RequestCoalescer` and awaits its own slice of
the answer. The batcher's loop takes every request already waiting; while an earlier call
is still in flight it lingers up to `api_batch_wait_ms` for more, so an idle server adds
no latency and a busy one forms large groups. One group (same `dimensions` and
`normalize`, at most
`api_batch_max_texts` texts) is one `EmbeddingService.embed` call in a thread: one MGET,
one durable query, one claim pipeline and packed queue messages for the whole group;
requests for different models, precision tiers (or, with strict tenant isolation,
different tenants) never share a group.

Per-input outcomes stay per input: one request's failed text never fails another
request. A call that raises (a server down) fails exactly the requests of its group.
A request that is cancelled (its client disconnected) leaves its call: what no other
request of the group wants is not encoded, and the call ends once all have left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from embedq.coordination.interest import RequestGroup
from embedq.service import EmbeddingService, Outcome

log = logging.getLogger("embedq.api")

# Threads that wait on the service; a waiting call costs a thread but little else.
SERVICE_THREADS = 64


@dataclass(eq=False)
class _Waiting:
    texts: list[str]
    dimensions: int | None
    normalize: bool | None
    precision: str | None
    tenant: str | None  # as fingerprints carry it: None unless isolation is strict
    model: str | None  # the served model asked for (None: the default)
    tokens: list[int] | None  # each text's token count, where the route counted them
    future: asyncio.Future[list[Outcome]] = field(repr=False)


class RequestCoalescer:
    def __init__(
        self, service: EmbeddingService, *, wait_ms: float, max_texts: int,
        threads: int = SERVICE_THREADS,
    ) -> None:
        self.service = service
        self.wait_s = wait_ms / 1000
        self.max_texts = max(1, max_texts)
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="embedq-api")
        self._inbox: asyncio.Queue[_Waiting] | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._calls: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._inbox = asyncio.Queue()
        self._loop_task = asyncio.create_task(self._run(), name="embedq-request-batcher")

    async def close(self) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        for task in list(self._calls):
            task.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)

    @property
    def in_flight(self) -> int:
        return len(self._calls)

    async def embed(self, texts: list[str], dimensions: int | None,
                    normalize: bool | None = None, precision: str | None = None,
                    tenant: str | None = None, model: str | None = None,
                    tokens: list[int] | None = None) -> list[Outcome]:
        """Outcomes for `texts`, in order, computed together with concurrent requests
        (`normalize` None: the deployment's EMBEDQ_NORMALIZE; `precision`: the tier,
        None: the default; `tenant`: the caller's, for strict isolation; `model`: a
        served model's name, None: the default; `tokens`: each text's token count, so
        misses are queued in messages of like length)."""
        assert self._inbox is not None, "RequestCoalescer.start() runs in the app's lifespan"
        waiting = _Waiting(texts, dimensions, normalize, precision,
                           self.service.isolated(tenant), model, tokens,
                           asyncio.get_running_loop().create_future())
        self._inbox.put_nowait(waiting)
        return await waiting.future

    async def _run(self) -> None:
        assert self._inbox is not None
        loop = asyncio.get_running_loop()
        while True:
            taken = [await self._inbox.get()]
            size = len(taken[0].texts)
            linger_until = loop.time() + (self.wait_s if self._calls else 0.0)
            while size < self.max_texts:
                try:
                    item = self._inbox.get_nowait()
                except asyncio.QueueEmpty:
                    left = linger_until - loop.time()
                    if left <= 0:
                        break
                    try:
                        item = await asyncio.wait_for(self._inbox.get(), left)
                    except TimeoutError:
                        break
                taken.append(item)
                size += len(item.texts)
            Key = tuple[int | None, bool | None, str | None, str | None, str | None]
            groups: dict[Key, list[_Waiting]] = {}
            for item in taken:
                if not item.future.done():  # its client went away while it waited
                    key = (item.dimensions, item.normalize, item.precision, item.tenant,
                           item.model)
                    groups.setdefault(key, []).append(item)
            for key, group in groups.items():
                task = asyncio.create_task(self._call(key, group))
                self._calls.add(task)
                task.add_done_callback(self._calls.discard)

    async def _call(self, key: tuple[int | None, bool | None, str | None, str | None,
                                     str | None], group: list[_Waiting]) -> None:
        dimensions, normalize, precision, tenant, model = key
        texts = [t for item in group for t in item.texts]
        counted = all(item.tokens is not None for item in group)
        tokens = [n for item in group for n in (item.tokens or [])] if counted else None
        requests = RequestGroup([len(item.texts) for item in group])
        for k, item in enumerate(group):
            item.future.add_done_callback(_leave_when_cancelled(requests, k))
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(
                self._executor, lambda: self.service.embed(texts, dimensions=dimensions,
                                           normalize=normalize, requests=len(group),
                                           precision=precision, tenant=tenant,
                                           group=requests, model=model, tokens=tokens)
            )
        except Exception as exc:
            for item in group:
                if not item.future.done():
                    item.future.set_exception(exc)
            return
        start = 0
        for item in group:
            part = result.outcomes[start : start + len(item.texts)]
            start += len(item.texts)
            if not item.future.done():
                item.future.set_result(part)


def _leave_when_cancelled(requests: RequestGroup, k: int
                          ) -> Callable[[asyncio.Future[Any]], None]:
    def leave(future: asyncio.Future[Any]) -> None:
        if future.cancelled():  # its client went away: request k leaves the call
            requests.leave(k)

    return leave
