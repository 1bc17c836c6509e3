"""Scenario 1: the worker process SIGKILLed mid-batch, and its whole process group
SIGKILLed with 500 texts in flight. Nothing is lost, only the batches in flight are
computed again, and every waiter is answered within the bound derived from the settings."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from embedq.encoders.hashing import HashingEncoder
from embedq.fingerprint import fingerprint
from embedq.service import EmbeddingService, EmbedResult
from tests import support
from tests.faults.helpers import digest, fault_env, recovery_bound_s, stored
from tests.faults.procs import batch_costs_s, wait_until
from tests.faults.recorder import Recorder

pytestmark = pytest.mark.integration

TEXTS = 500
WAITERS = 10
BATCH = 64  # texts per batch (the CPU default), set explicitly so the bound is derived
# Each batch sleeps this long, so a batch is in flight when the worker is stopped. After
# the kill each text of that batch is a suspect, encoded alone: up to BATCH sleeps more.
BATCH_S = 0.05


@pytest.fixture
def undo() -> Iterator[list[Callable[[], object]]]:
    """What a run opened, undone after it, also when it fails: its service's pooled
    database connections (the twenty runs of `make faults K=10`, run on their own, used up
    Postgres's 100) and its first worker (a run that failed before its kill left it
    beating into the shared Redis, where later tests counted it as one of theirs)."""
    steps: list[Callable[[], object]] = []
    yield steps
    for step in reversed(steps):
        step()


@pytest.mark.parametrize("target", ["process", "group"])
def test_killed_worker_loses_nothing_and_answers_within_the_bound(
    target: str, rep: int, record: Recorder, redis_url: str, pg_url: str, tmp_path: Path,
    salt: str, undo: list[Callable[[], object]],
) -> None:
    env = fault_env(redis_url, pg_url, tmp_path, f"kill-{salt}", batch_max_texts=BATCH)
    settings = support.settings_from(env)
    batch = settings.worker.batch_max_texts
    ledger = Path(env["EMBEDQ_LEDGER_PATH"])
    texts = [f"{salt} kill {target} {i} [[sleep:{BATCH_S}]]" for i in range(TEXTS)]
    first = support.WorkerProcess(env, tmp_path / "w1.log").start()
    undo.append(first.kill_group)
    service = EmbeddingService(settings)
    undo.append(service.close)
    per_waiter = TEXTS // WAITERS
    results: dict[int, tuple[EmbedResult, float]] = {}

    def waiter(n: int) -> None:
        mine = texts[n * per_waiter:(n + 1) * per_waiter]
        result = service.embed(mine, timeout_s=120)
        results[n] = (result, time.monotonic())

    spec = service.spec()
    fps = [fingerprint(spec, t) for t in texts]
    threads = [threading.Thread(target=waiter, args=(n,), daemon=True) for n in range(WAITERS)]
    for t in threads:
        t.start()
    signal_target = os.kill if target == "process" else os.killpg

    def frozen_with_one_batch_in_flight() -> bool:
        """Mid-job, the writer idle: stop the worker where a first batch is persisted and
        exactly the next one is encoding. The writer overlaps the next encode, so a
        kill while it writes would strand two batches; a stopped worker cannot move on
        between this look and the kill."""
        done = len(stored(service.db, fps))
        if done < batch or len(support.ledger_counts(ledger)) <= done:
            return False
        signal_target(first.pid, signal.SIGSTOP)
        done = len(stored(service.db, fps))  # persisted first: the ledger only grows
        if 0 < len(support.ledger_counts(ledger)) - done <= batch:
            return True
        signal_target(first.pid, signal.SIGCONT)
        return False

    wait_until(frozen_with_one_batch_in_flight, 60, "one batch encoding after a first one")
    signal_target(first.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    first.kill_group()  # reaps it; the group is already gone

    fp_of = {digest(t): fp for t, fp in zip(texts, fps, strict=True)}
    passed_before = set(support.ledger_counts(ledger))
    stored_at_kill = stored(service.db, fps)
    in_flight = {d for d in passed_before if fp_of[d] not in stored_at_kill}
    assert 0 < len(stored_at_kill) < TEXTS, "the kill must land mid-job"

    start = time.monotonic()
    second = support.WorkerProcess(env, tmp_path / "w2.log").start()
    worker_start_s = time.monotonic() - start
    try:
        for t in threads:
            t.join(timeout=150)
        assert not any(t.is_alive() for t in threads), "a waiter hung"
    finally:
        second.stop()

    enc = HashingEncoder()
    for n, (result, _) in sorted(results.items()):
        for text, vec in zip(texts[n * per_waiter:], result.vectors(), strict=False):
            raw = enc.encode([text])[0]
            np.testing.assert_allclose(vec, raw / np.linalg.norm(raw), rtol=1e-5, atol=1e-6)
    answered = sum(len(r.outcomes) for r, _ in results.values())
    lost = TEXTS - len(stored(service.db, fps))
    passes = support.ledger_counts(ledger)
    recomputed = {d for d, n in passes.items() if n > 1}
    # The backlog the new worker worked through is part of each waiter's wait.
    drain_s = sum(batch_costs_s(tmp_path / "w2.log"))
    bound_s = recovery_bound_s(settings, worker_start_s, drain_s)
    worst_wait_s = max(done - killed_at for _, done in results.values())

    record.figure("lost", lost, limit=0)
    record.figure("answered", answered, worse="lower", limit=TEXTS)
    record.figure("recomputed", len(recomputed), limit=batch)
    record.figure("in_flight_at_kill", len(in_flight), limit=batch)
    record.figure("worst_wait_s", round(worst_wait_s, 2), limit=round(bound_s, 2))
    record.figure("worker_start_s", round(worker_start_s, 2))
    assert lost == 0 and answered == TEXTS and len(passes) == TEXTS
    assert recomputed <= in_flight, "only texts in flight when the worker died run again"
    assert len(recomputed) <= batch, "more than the one batch in flight ran again"
    assert worst_wait_s <= bound_s, (worst_wait_s, bound_s)
