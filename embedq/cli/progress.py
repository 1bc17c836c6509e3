"""Waiting for a job, with its progress on stderr: done, cached, coalesced, failed,
texts/s, ETA, and whether it waits for its off-peak window.

On a terminal, a tqdm bar redrawn in place; elsewhere (a log file, CI) the same line,
printed at most every `log_every_s` and once at the end, so a long job does not flood
the log.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from tqdm import tqdm

from embedq.jobs.service import JobService
from embedq.models import JobStatus

FINAL = JobStatus.final()
BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]"
LINE_FORMAT = BAR_FORMAT.replace("{bar}", "{bar:20}")  # no terminal to fit: a fixed bar
UNIT = " texts"
LOG_EVERY_S = 10.0
MIN_POLL_S = 0.05  # the shortest pause between two reads of the job, near its end


def finished(state: dict[str, Any]) -> int:
    p = state["progress"]
    return int(p["done"]) + int(p["failed"])


def postfix(state: dict[str, Any]) -> str:
    """Everything but the bar, the count and the rate: the counts and the status."""
    p = state["progress"]
    status = str(state["status"])
    if status == JobStatus.QUEUED and state.get("waiting_until"):
        status = f"waiting for its window ({state['waiting_until']})"
    return (f"done={p['done']:,} cached={p['cached']:,} coalesced={p['coalesced']:,} "
            f"failed={p['failed']:,}, {status}")


def next_poll_s(state: dict[str, Any], rate: float | None, interval_s: float,
                waited_s: float = float("inf")) -> float:
    """How long to wait before reading the job again: `interval_s`, or less when at the
    measured rate it ends sooner (down to MIN_POLL_S), so `--wait` returns within a
    fraction of a second of the job's end instead of up to a whole interval after it.
    Before a rate is known, half of what was waited so far (`waited_s`), from MIN_POLL_S
    up to the interval: a small job's `--wait` returned a whole interval (1 s) after a
    job that took a few milliseconds, and a large one is read about ten times in its
    first second before the rate takes over."""
    if not rate or rate <= 0:
        return min(interval_s, max(MIN_POLL_S, waited_s / 2))
    remaining = max(int(state["progress"]["total"]) - finished(state), 0)
    return min(interval_s, max(MIN_POLL_S, remaining / rate))


class _Rate:
    """Texts a second since the job was first seen running (None before that)."""

    def __init__(self) -> None:
        self.first: tuple[float, int] | None = None

    def update(self, state: dict[str, Any], now: float) -> float | None:
        if self.first is None and state["status"] == JobStatus.RUNNING:
            self.first = (now, finished(state))
        if self.first is None or now <= self.first[0]:
            return None
        return (finished(state) - self.first[1]) / (now - self.first[0])


def render(state: dict[str, Any], rate: float | None, elapsed_s: float) -> str:
    """One progress line, as the terminal bar shows it (no cursor control)."""
    return str(tqdm.format_meter(
        finished(state), max(int(state["progress"]["total"]), 1), elapsed_s,
        unit=UNIT, rate=rate or None, postfix=postfix(state), bar_format=LINE_FORMAT,
    ))


def wait(jobs: JobService, job_id: str, *, interval_s: float = 1.0,
         stream: TextIO | None = None, show: bool = True,
         log_every_s: float = LOG_EVERY_S) -> dict[str, Any]:
    """Poll until the job ends; return its last description."""
    out = stream or sys.stderr
    if show and out.isatty():
        return _wait_on_terminal(jobs, job_id, interval_s, out)
    return _wait_logging(jobs, job_id, interval_s, out if show else None, log_every_s)


def _wait_on_terminal(jobs: JobService, job_id: str, interval_s: float,
                      out: TextIO) -> dict[str, Any]:
    started = time.monotonic()
    state = jobs.describe(job_id)
    measured = _Rate()
    with tqdm(total=int(state["progress"]["total"]), initial=finished(state), unit=UNIT,
              file=out, dynamic_ncols=True, bar_format=BAR_FORMAT, smoothing=0.1) as bar:
        while True:
            bar.total = int(state["progress"]["total"])
            bar.set_postfix_str(postfix(state), refresh=False)
            bar.update(finished(state) - bar.n)
            bar.refresh()
            if state["status"] in FINAL:
                return state
            now = time.monotonic()
            time.sleep(next_poll_s(state, measured.update(state, now), interval_s,
                                   now - started))
            state = jobs.describe(job_id)


def _wait_logging(jobs: JobService, job_id: str, interval_s: float, out: TextIO | None,
                  log_every_s: float) -> dict[str, Any]:
    started = time.monotonic()
    measured = _Rate()
    printed_at = float("-inf")
    while True:
        state = jobs.describe(job_id)
        now = time.monotonic()
        rate = measured.update(state, now)
        final = state["status"] in FINAL
        if out is not None and (final or now - printed_at >= log_every_s):
            out.write(render(state, rate, now - started) + "\n")
            out.flush()
            printed_at = now
        if final:
            return state
        time.sleep(next_poll_s(state, rate, interval_s, now - started))
