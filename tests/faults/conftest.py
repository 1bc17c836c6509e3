"""Fault-suite fixtures: K repetitions, a recorder per run, and processes to kill.

`EMBEDQ_FAULT_REPEAT=K` runs every scenario K times (`make faults K=10`); `make test`
runs each once. Every run records its figures and pass/fail through `record`.

`EMBEDQ_FAULTS_QUICK=1` (set by `make test`) runs the scenarios that are long only
because of their size at a smaller one (`helpers.scaled`): a shorter database outage, fewer
identical requests, smaller jobs under the Redis restart and out of memory, fewer texts
near the visibility timeout. The assertions and bounds are the same; `make faults` runs
the full sizes, and its report comes from them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.procs import RedisServer
from tests.faults.recorder import Recorder

REPEAT_ENV = "EMBEDQ_FAULT_REPEAT"


def repeat() -> int:
    raw = os.environ.get(REPEAT_ENV, "1")
    try:
        value = int(raw)
    except ValueError:
        raise pytest.UsageError(f"{REPEAT_ENV}={raw!r} is not an integer: use e.g. 10") from None
    if value < 1:
        raise pytest.UsageError(f"{REPEAT_ENV}={raw!r} must be at least 1")
    return value


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "rep" in metafunc.fixturenames:
        metafunc.parametrize("rep", range(repeat()), ids=lambda i: f"rep{i}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when == "call" or (report.when == "setup" and report.failed):
        item.stash[_OUTCOME] = report.passed


_OUTCOME = pytest.StashKey[bool]()


@pytest.fixture
def record(request: pytest.FixtureRequest, rep: int) -> Iterator[Recorder]:
    """This run's recorder; written with the run's outcome when the test ends."""
    params = getattr(request.node, "callspec", None)
    extra = [str(v) for k, v in (params.params.items() if params else []) if k != "rep"]
    name = request.node.originalname + (f"[{','.join(extra)}]" if extra else "")
    recorder = Recorder(name, rep)
    yield recorder
    passed = request.node.stash.get(_OUTCOME, False)
    line = recorder.write(passed)
    print(f"\nfault figures: {line}")


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis of this test's own (no persistence), to kill and restart by pid."""
    server = RedisServer(tmp_path / "redis").start()
    try:
        yield server
    finally:
        server.stop()
