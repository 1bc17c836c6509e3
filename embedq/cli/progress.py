"""Waiting for a job with a one-line progress bar: done, cached, coalesced, texts/s, ETA."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from embedq.jobs.service import JobService
from embedq.models import JobStatus

FINAL = JobStatus.final()
BAR_WIDTH = 24


def render(state: dict[str, Any], rate: float) -> str:
    p = state["progress"]
    total = max(int(p["total"]), 1)
    finished = int(p["done"]) + int(p["failed"])
    filled = int(BAR_WIDTH * finished / total)
    bar = "#" * filled + "-" * (BAR_WIDTH - filled)
    left = total - finished
    eta = f"{left / rate:,.0f} s" if rate > 0 and left else "-"
    status = state["status"]
    if status == JobStatus.QUEUED and state.get("waiting_until"):
        status = f"waiting for its window ({state['waiting_until']})"
    return (f"[{bar}] {finished:,}/{p['total']:,} done={p['done']:,} "
            f"cached={p['cached']:,} coalesced={p['coalesced']:,} failed={p['failed']:,} "
            f"{rate:,.0f} texts/s ETA {eta} {status}")


def wait(jobs: JobService, job_id: str, *, interval_s: float = 1.0,
         stream: TextIO | None = None, show: bool = True) -> dict[str, Any]:
    """Poll until the job ends; return its last description."""
    out = stream or sys.stderr
    tty = out.isatty()
    first_at: tuple[float, int] | None = None
    while True:
        state = jobs.describe(job_id)
        p = state["progress"]
        finished = int(p["done"]) + int(p["failed"])
        now = time.monotonic()
        if first_at is None and state["status"] == "running":
            first_at = (now, finished)
        rate = 0.0
        if first_at is not None and now > first_at[0]:
            rate = (finished - first_at[1]) / (now - first_at[0])
        if show:
            line = render(state, rate)
            out.write(("\r" + line + "\x1b[K") if tty else line + "\n")
            out.flush()
        if state["status"] in FINAL:
            if show and tty:
                out.write("\n")
            return state
        time.sleep(interval_s)
