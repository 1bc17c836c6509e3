"""A text's outcome keeps the promises of the future it replaced in the worker."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import InvalidStateError

import pytest

from embedq.workers.outcome import Outcome, wait_all


def test_set_once_then_read_without_waiting() -> None:
    ok: Outcome[bytes] = Outcome()
    bad: Outcome[bytes] = Outcome()
    assert not ok.done()
    ok.set_result(b"v")
    bad.set_exception(ValueError("nan"))
    assert ok.done() and ok.result() == b"v" and ok.exception() is None
    with pytest.raises(ValueError, match="nan"):
        bad.result()
    assert isinstance(bad.exception(), ValueError)
    for outcome in (ok, bad):
        with pytest.raises(InvalidStateError):
            outcome.set_result(b"again")
        with pytest.raises(InvalidStateError):
            outcome.set_exception(RuntimeError())
    assert ok.result() == b"v"  # the first settlement stands


def test_callbacks_run_once_settled_or_at_once_and_a_failing_one_is_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    outcome: Outcome[int] = Outcome()
    seen: list[int] = []

    def boom(_: Outcome[int]) -> None:
        raise RuntimeError("callback bug")

    outcome.add_done_callback(lambda o: seen.append(o.result()))
    outcome.add_done_callback(boom)
    assert seen == []
    with caplog.at_level(logging.ERROR, "embedq.worker"):
        outcome.set_result(7)  # the failing callback does not reach the setter
    assert seen == [7]
    assert "callback failed" in caplog.text
    outcome.add_done_callback(lambda o: seen.append(o.result() + 1))
    assert seen == [7, 8]


def test_wait_all_returns_when_the_last_is_settled_from_other_threads() -> None:
    outcomes: list[Outcome[int]] = [Outcome() for _ in range(500)]
    outcomes[0].set_result(0)  # settled before the wait

    def settle(part: list[Outcome[int]]) -> None:
        for n, outcome in enumerate(part):
            outcome.set_result(n)

    threads = [threading.Thread(target=settle, args=(outcomes[1 + k::4],)) for k in range(4)]
    for t in threads:
        t.start()
    assert wait_all(outcomes, timeout=10) == []
    assert all(o.done() for o in outcomes)
    for t in threads:
        t.join()


def test_a_timed_wait_names_what_is_still_open() -> None:
    done: Outcome[int] = Outcome()
    done.set_result(1)
    open_: Outcome[int] = Outcome()
    started = time.monotonic()
    assert wait_all([done, open_], timeout=0.05) == [open_]
    assert time.monotonic() - started >= 0.05
    with pytest.raises(TimeoutError):
        open_.result(timeout=0.01)
    later = threading.Timer(0.05, open_.set_result, args=(2,))
    later.start()
    assert open_.result(timeout=10) == 2
    later.join()
