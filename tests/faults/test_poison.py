"""Scenario 2: a poison text whose encoding kills the worker every time, among 100
healthy texts. It is tried at most `max_attempts` times and then fails with a clear
error; the healthy texts all succeed. A supervisor restarts the worker whenever it dies,
as a process manager would."""

from __future__ import annotations

import contextlib
import signal
import threading
from pathlib import Path

import pytest

from embedq.errors import PoisonText
from embedq.service import EmbeddingService
from tests import support
from tests.faults.helpers import digest, fault_env
from tests.faults.recorder import Recorder

pytestmark = pytest.mark.integration

MAX_ATTEMPTS = 3


def test_poison_text_is_dead_lettered_and_healthy_texts_succeed(
    rep: int, record: Recorder, redis_url: str, pg_url: str, tmp_path: Path, salt: str
) -> None:
    env = fault_env(redis_url, pg_url, tmp_path, f"poison-{salt}", visibility_timeout_s=2,
                    run_lease_ms=1500, max_attempts=MAX_ATTEMPTS)
    ledger = Path(env["EMBEDQ_LEDGER_PATH"])
    healthy = [f"{salt} healthy {i}" for i in range(100)]
    poison = f"{salt} poison [[kill]]"
    texts = [*healthy[:50], poison, *healthy[50:]]
    stop = threading.Event()
    starts: list[support.WorkerProcess] = []
    deaths: list[int] = []  # the exit status of each worker that died under us

    def supervise() -> None:
        while not stop.is_set():
            worker = support.WorkerProcess(env, tmp_path / f"w{len(starts)}.log")
            starts.append(worker)
            # The poison can kill it before start() has seen it ready.
            with contextlib.suppress(RuntimeError):
                worker.start()
            assert worker.proc is not None
            while worker.proc.poll() is None:
                if stop.wait(0.1):
                    return
            deaths.append(worker.proc.returncode)

    supervisor = threading.Thread(target=supervise, daemon=True)
    supervisor.start()
    try:
        result = EmbeddingService(support.settings_from(env)).embed(texts, timeout_s=120)
    finally:
        stop.set()
        supervisor.join(timeout=90)
        for worker in starts:
            worker.stop()

    outcomes = dict(zip(texts, result.outcomes, strict=True))
    healthy_ok = sum(1 for t in healthy if outcomes[t].vector is not None)
    error = outcomes[poison].error
    attempts = support.ledger_counts(ledger).get(digest(poison), 0)
    record.figure("healthy_ok", healthy_ok, worse="lower", limit=100)
    record.figure("poison_attempts", attempts, limit=MAX_ATTEMPTS)
    record.figure("worker_deaths", len(deaths), limit=MAX_ATTEMPTS)
    assert healthy_ok == 100
    assert isinstance(error, PoisonText), error
    assert "dead-lettered" in str(error) and "died" in str(error)
    # Each attempt is one forward pass that kills its worker; the last is refused unrun.
    assert attempts == MAX_ATTEMPTS, attempts
    assert deaths == [-signal.SIGKILL] * MAX_ATTEMPTS, deaths
