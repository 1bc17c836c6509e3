"""`embedq bulk --wait` progress: one line per interval in a log, a bar on a terminal; both
carry done, cached, coalesced, failed, texts/s, ETA and the job's status. A real embedded
job (SQLite, the hashing encoder) runs while `wait` polls it."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from embedq.cli.progress import MIN_POLL_S, next_poll_s, render, wait
from embedq.config import Settings
from embedq.deployment import Deployment
from embedq.jobs.service import JobService


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def jobs(tmp_path: Path) -> Iterator[JobService]:
    settings = Settings.from_env({"EMBEDQ_DATA_DIR": str(tmp_path), "EMBEDQ_ENCODER": "hashing"})
    deployment = Deployment.from_settings(settings)
    try:
        yield deployment.jobs()
    finally:
        deployment.close()


def run(jobs: JobService, texts: list[str]) -> str:
    job_id = jobs.submit(texts, window=None)
    threading.Thread(target=jobs.run_here, args=(job_id,), daemon=True).start()
    return job_id


def test_a_log_gets_a_line_per_interval_and_the_final_counts(jobs: JobService) -> None:
    job_id = run(jobs, [f"progress {i}" for i in range(40)] + ["progress 0"])
    out = io.StringIO()
    state = wait(jobs, job_id, interval_s=0.05, stream=out, log_every_s=3600)
    assert state["status"] == "succeeded"
    lines = out.getvalue().splitlines()
    assert 1 <= len(lines) <= 2, lines  # the first poll, then only the end
    assert "\r" not in out.getvalue()
    last = lines[-1]
    assert last.startswith("100%|") and "41/41" in last and "texts/s" in last, last
    assert "done=41" in last and "failed=0" in last and last.endswith("succeeded]"), last


def test_a_terminal_gets_a_bar_redrawn_in_place(jobs: JobService) -> None:
    job_id = run(jobs, [f"terminal {i}" for i in range(20)])
    out = Terminal()
    assert wait(jobs, job_id, interval_s=0.05, stream=out)["status"] == "succeeded"
    drawn = out.getvalue()
    assert "\r" in drawn and "20/20" in drawn and "done=20" in drawn and "succeeded" in drawn


def test_a_job_waiting_for_its_window_says_so() -> None:
    state = {"status": "queued", "waiting_until": "2030-01-01T22:00:00+00:00",
             "progress": {"total": 10, "done": 4, "failed": 1, "cached": 2, "coalesced": 3}}
    line = render(state, None, 5.0)
    assert "5/10" in line and "cached=2" in line and "coalesced=3" in line and "failed=1" in line
    assert "waiting for its window (2030-01-01T22:00:00+00:00)" in line
    running = render({**state, "status": "running"}, 2.5, 5.0)
    assert "2.50 texts/s" in running and "<00:02" in running, running


def _state(done: int, total: int) -> dict[str, object]:
    return {"status": "running", "progress": {"done": done, "failed": 0, "total": total}}


def test_the_poll_shortens_as_the_job_nears_its_end() -> None:
    # Before a rate is known: soon at first (a small job ends within milliseconds),
    # then half of what was waited, up to the whole interval.
    assert next_poll_s(_state(0, 20_000), None, 1.0, 0.0) == MIN_POLL_S
    assert next_poll_s(_state(0, 20_000), None, 1.0, 0.6) == pytest.approx(0.3)
    assert next_poll_s(_state(0, 20_000), None, 1.0, 30.0) == 1.0
    # While the end is far: the whole interval.
    assert next_poll_s(_state(1_000, 20_000), 5_000.0, 1.0) == 1.0
    # 1,000 texts left at 5,000 a second: read again when it should end, not 1 s later.
    assert next_poll_s(_state(19_000, 20_000), 5_000.0, 1.0) == pytest.approx(0.2)
    # At the end (or past it: counts can lag the status), never a busy loop.
    assert next_poll_s(_state(20_000, 20_000), 5_000.0, 1.0) == MIN_POLL_S
    assert next_poll_s(_state(19_999, 20_000), 5_000.0, 1.0) == MIN_POLL_S
