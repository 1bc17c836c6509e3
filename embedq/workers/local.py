"""Online misses encoded by the process that received them (EMBEDQ_ONLINE_ENCODE=local).

TEI and infinity answer a burst of one-text requests at close to the model's batched rate
because the process that receives the requests batches them straight into the model. With
`local` an API process does the same: it holds a `WorkerRuntime` (the batcher, writer and
fencing a worker runs) and the fingerprints its requests claimed go to that batcher
instead of the online queue.

What stays as on the queue path:
- the claim: taken before, held until the vector is in both stores, so a request for the
  same text (in this process or another) joins the computation and is answered from the
  stores; a claim that outlives its process is rescued by its waiters as usual;
- fencing: a run lease per fingerprint (one another execution is running is left to it
  and awaited like any claim), attempt counts, suspects encoded alone, dead letters, and
  `abandoned` for texts whose callers all left before their batch encoded;
- the writes: one statement per batch, then the hot store, claim release and "done" for
  waiters elsewhere, on the writer thread.

What goes: the broker hop (publish, transit, consume, ack, the task's own bookkeeping) and
the notification hop for the caller that computed: it has its vector as soon as the model
produced it and it was validated, while the writer thread stores it. A process that dies
in that window takes with it a vector its caller already has and nobody stored; the next
request for that text computes it again.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import wait as wait_futures

from embedq.coordination.executor import Executor, Settled, Ticket
from embedq.coordination.store import Hold
from embedq.errors import EmbeddingFailed, EmbedqError, Unavailable
from embedq.fingerprint import EncodeSpec
from embedq.workers.items import ONLINE, Item
from embedq.workers.outcome import Outcome, wait_all
from embedq.workers.runtime import Served, WorkerRuntime

log = logging.getLogger("embedq.worker")

CALLERS_CHECK_S = 0.05  # how soon a departed caller's interest is withdrawn
DRAIN_S = 30.0  # at exit or close: how long the writer may take to store what is left


class LocalExecutor:
    """The `Executor` that encodes claimed online fingerprints in this process, on
    `runtime`'s batcher; what this process does not serve (another model or tier), or
    cannot start because a store failed before anything reached the model, goes to
    `fallback` (the queue), with its retries."""

    def __init__(self, runtime: WorkerRuntime, fallback: Executor) -> None:
        self.runtime = runtime
        self.fallback = fallback
        self._unwritten: set[Outcome[bytes]] = set()
        self._lock = threading.Lock()
        # A process that exits (a CLI call, a script's Client) right after its answers
        # first lets the writer store what it computed.
        atexit.register(self.drain)

    def drain(self, timeout_s: float = DRAIN_S) -> None:
        """Wait (at most `timeout_s`) until every vector computed here is stored."""
        with self._lock:
            pending = list(self._unwritten)
        if pending:
            left = wait_all(pending, timeout=timeout_s)
            if left:
                log.warning("%d vectors computed here were not stored within %.0f s",
                            len(left), timeout_s)

    def warm_up(self) -> None:
        """The model warms on its own thread; the queue it falls back to warms here."""
        self.fallback.warm_up()

    def start(self, spec: EncodeSpec, pairs: list[tuple[str, str]], ticket: Ticket,
              deadline: float) -> Settled:
        """Encode `pairs` (claimed by `ticket.owner`), waiting at most until `deadline`,
        or until no request of `ticket.group` wants what is left (each one that leaves
        has its interest withdrawn, so a text nobody waits for is not encoded). Returns
        what was settled; the rest (leased by another execution, not done by then) is
        the caller's to await like any claim."""
        served = self.runtime.serving(spec)
        if served is None:
            return self.fallback.start(spec, pairs, ticket, deadline)
        try:
            return self._encode(served, spec, pairs, ticket, deadline)
        except Unavailable as exc:
            log.warning("encoding here failed before the model ran (%s): queueing instead",
                        exc)
            return self.fallback.start(spec, pairs, ticket, deadline)
        except Exception:
            with contextlib.suppress(EmbedqError):
                self.runtime.hot.release(Hold.CLAIM, [fp for fp, _ in pairs])
            raise

    def _encode(self, served: Served, spec: EncodeSpec, pairs: list[tuple[str, str]],
                ticket: Ticket, deadline: float) -> Settled:
        """Raises what the stores raise before anything was handed to the model."""
        fencing = self.runtime.fencing
        # A vector stored between the caller's lookup and its claim is found here.
        leased = fencing.lease([fp for fp, _ in pairs])
        settled: Settled = dict(leased.stored)
        # Attempt counts come with the leases, as on the worker path: a count raised by
        # another execution still running the text is not a death to count here.
        try:
            dead, suspects = fencing.triage(leased.won)
        except BaseException:
            _unlease(self.runtime, list(leased.won))
            raise
        if dead:
            settled.update({fp: _as_error(exc) for fp, exc in dead.items()})
            _unlease(self.runtime, list(dead))
        mine = [fp for fp in leased.won if fp not in dead]
        text_of = dict(pairs)
        answers: dict[str, Future[bytes]] = {fp: Future() for fp in mine}
        ticket = dataclasses.replace(ticket, answer=_answerer(answers))
        items = [Item(fp, text_of[fp], spec, ONLINE, alone=fp in suspects, ticket=ticket)
                 for fp in mine]
        with self._lock:
            self._unwritten.update(i.future for i in items)
        finished = self._finisher(items, answers, mine)
        for item in items:
            item.future.add_done_callback(finished)
        try:
            served.batcher.submit(items)
        except BaseException:
            _unlease(self.runtime, mine)
            raise
        self._wait(answers, deadline, ticket)
        for fp, answer in answers.items():
            if answer.done():
                exc = answer.exception()
                settled[fp] = answer.result() if exc is None else _as_error(exc)
        return settled

    def _finisher(self, items: list[Item], answers: dict[str, Future[bytes]],
                  leased: list[str]) -> Callable[[Outcome[bytes]], None]:
        """The done-callback of each item's future (resolved after the writes, or on
        failure): its answer gets the final outcome unless it had the vector already,
        and once every item is through, the run leases are released."""
        answer_of = {id(i.future): answers[i.fp] for i in items}
        left = [len(items)]

        def finished(final: Outcome[bytes]) -> None:
            answer = answer_of[id(final)]
            with contextlib.suppress(InvalidStateError):  # answered before the writes
                exc = final.exception()
                if exc is not None:
                    answer.set_exception(exc)
                else:
                    answer.set_result(final.result())
            with self._lock:
                self._unwritten.discard(final)
                left[0] -= 1
                last = left[0] == 0
            if last:
                _unlease(self.runtime, leased)

        return finished

    def _wait(self, answers: dict[str, Future[bytes]], deadline: float,
              ticket: Ticket) -> None:
        """Until every answer is in, the deadline, or no request still here wants the
        fingerprints left; a departure is noticed within CALLERS_CHECK_S."""
        group = ticket.group
        while True:
            left = deadline - time.monotonic()
            open_fps = [fp for fp, answer in answers.items() if not answer.done()]
            if not open_fps or left <= 0:
                return
            wait_futures([answers[fp] for fp in open_fps],
                         timeout=min(left, CALLERS_CHECK_S))
            if group is not None and group.wake.is_set():
                group.wake.clear()
                if not group.unwant_departed(self.runtime.hot, open_fps):
                    return


def _answerer(answers: dict[str, Future[bytes]]) -> Callable[[str, bytes], None]:
    """Hands a validated vector to its waiting call before the writes."""
    def answer(fp: str, vector: bytes) -> None:
        future = answers.get(fp)
        if future is not None:
            with contextlib.suppress(InvalidStateError):
                future.set_result(vector)

    return answer


def _unlease(runtime: WorkerRuntime, fps: list[str]) -> None:
    if not fps:
        return
    try:
        runtime.fencing.unlease(fps)
    except EmbedqError as exc:  # they expire within run_lease_ms
        log.warning("releasing %d run leases failed: %s", len(fps), exc)


def _as_error(exc: BaseException) -> EmbedqError:
    if isinstance(exc, EmbedqError):
        return exc
    return EmbeddingFailed(f"the encoder failed on this text: {exc}")
