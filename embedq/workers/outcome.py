"""A text's outcome in the worker: set once by whoever finishes it, waited for by the
thread that submitted it.

Every text the batcher handles has one, and a job's slice waits for hundreds at once, so
it is lighter than `concurrent.futures.Future`, whose own `Condition` (made with each
future) and waiter objects cost 3.7 us a text to create, wait for and set: an embedded
job on a fast device spent a sixth of its worker threads' interpreter time on them. An
`Outcome` is four slots under one lock that every outcome shares, held for the few
instructions a change takes; `wait_all` waits for many through one latch. Its methods
are the future's that the worker uses, with the same meaning: a second set raises
`InvalidStateError`, a callback added to a finished outcome runs at once, and one that
raises is logged, not raised to whoever set the outcome.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import InvalidStateError
from typing import Any, Generic, TypeVar

T = TypeVar("T")

log = logging.getLogger("embedq.worker")

_LOCK = threading.Lock()


class Outcome(Generic[T]):
    """A value or an error, once; see the module's docstring."""

    __slots__ = ("_callbacks", "_done", "_error", "_value")

    def __init__(self) -> None:
        self._done = False
        self._value: T | None = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Outcome[T]], object]] | None = None

    def done(self) -> bool:
        return self._done

    def set_result(self, value: T) -> None:
        self._settle(value, None)

    def set_exception(self, error: BaseException) -> None:
        self._settle(None, error)

    def _settle(self, value: T | None, error: BaseException | None) -> None:
        with _LOCK:
            if self._done:
                raise InvalidStateError(f"{self!r} is settled already")
            self._value, self._error, self._done = value, error, True
            callbacks, self._callbacks = self._callbacks, None
        for callback in callbacks or ():
            self._call(callback)

    def add_done_callback(self, callback: Callable[[Outcome[T]], object]) -> None:
        """`callback(self)` once settled: at once if it is."""
        with _LOCK:
            if not self._done:
                if self._callbacks is None:
                    self._callbacks = [callback]
                else:
                    self._callbacks.append(callback)
                return
        self._call(callback)

    def _call(self, callback: Callable[[Outcome[T]], object]) -> None:
        try:
            callback(self)
        except Exception:
            log.exception("an outcome's callback failed")

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The error (None for a value), waiting up to `timeout`; TimeoutError past it."""
        if not self._done and wait_all([self], timeout):
            raise TimeoutError(f"no outcome within {timeout} s")
        return self._error

    def result(self, timeout: float | None = None) -> T:
        """The value, or its error raised, waiting up to `timeout`; TimeoutError past it."""
        error = self.exception(timeout)
        if error is not None:
            raise error
        return self._value  # type: ignore[return-value]  # set with the flag


def wait_all(outcomes: Iterable[Outcome[Any]], timeout: float | None = None
             ) -> list[Outcome[Any]]:
    """Wait until every outcome is settled, at most `timeout` seconds (None: no limit);
    return those still open."""
    pending = [o for o in outcomes if not o.done()]
    if not pending:
        return []
    latch = _Latch(len(pending))
    for outcome in pending:
        outcome.add_done_callback(latch.count_down)
    latch.event.wait(timeout)
    return [o for o in pending if not o.done()]


class _Latch:
    __slots__ = ("event", "left", "lock")

    def __init__(self, count: int) -> None:
        self.left = count
        self.lock = threading.Lock()
        self.event = threading.Event()

    def count_down(self, _: Outcome[Any]) -> None:
        with self.lock:
            self.left -= 1
            if self.left:
                return
        self.event.set()
