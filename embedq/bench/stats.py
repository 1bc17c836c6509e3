"""The one percentile every bench reports with, and process CPU read from /proc."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np


def percentile(samples: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0-100) of `samples`, interpolated linearly between the two
    nearest ranks (numpy's default); 0.0 when there are none. Any order, any unit."""
    if not samples:
        return 0.0
    return float(np.percentile(np.asarray(samples, dtype=np.float64), q))


def proc_cpu_s(pids: Iterable[int], *, descendants: bool = False) -> float | None:
    """CPU seconds (user + system, every thread) of `pids`, and with `descendants` of
    their children too, from /proc (a pid gone meanwhile counts 0); None without /proc."""
    if not Path("/proc/self/stat").exists():
        return None
    ours = set(pids)
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, int]] = {}  # pid -> (ppid, CPU ticks)
    entries = Path("/proc").iterdir() if descendants else (Path(f"/proc/{p}") for p in ours)
    for entry in entries:
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                # after the name: state, ppid (1), ..., utime (11), stime (12)
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                stats[int(entry.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    grew = descendants
    while grew:
        more = {pid for pid, (ppid, _) in stats.items() if ppid in ours} - ours
        ours |= more
        grew = bool(more)
    return sum(stats[pid][1] for pid in ours if pid in stats) / tick
