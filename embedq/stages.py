"""Where a process's CPU goes, stage by stage, when asked (EMBEDQ_STAGE_TIMING=true).

`embedq bench pipeline` starts its processes with stage timing on and reads, from the
cluster's counters, the CPU seconds each stage spent: `with stages.timed("claims"): ...`
adds the calling thread's CPU time (`time.thread_time`) spent inside to that stage's total
in this process; the totals go to the hot store with the counters the process writes
anyway (`take()` hands over what accumulated since the last call), under
`stage_cpu_us_<stage>`. Off (the default), `timed` costs one attribute check.

The stages: lookup (exact cache), claims, publish (the queue hop in the producer), wait
(waiting for outcomes), notify (the "done" listener), fencing (leases, attempts, the
durable lookup under them), encode (the model), writer (finishing, persisting, the hot
store's batch record), chunk (a job chunk's own bookkeeping). What a process spent outside
them (HTTP, JSON, Celery's consuming) is its CPU total minus their sum.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

STAGES = ("lookup", "claims", "publish", "wait", "notify", "fencing", "encode", "writer",
          "chunk")
PREFIX = "stage_cpu_us_"


class _Timing:
    def __init__(self) -> None:
        self.on = False
        self._lock = threading.Lock()
        self._us: dict[str, int] = {}

    def add(self, stage: str, seconds: float) -> None:
        with self._lock:
            self._us[stage] = self._us.get(stage, 0) + int(seconds * 1_000_000)

    def take(self) -> dict[str, int]:
        """The counters accumulated since the last call, named for the hot store."""
        if not self.on:
            return {}
        with self._lock:
            out, self._us = self._us, {}
        return {PREFIX + name: us for name, us in out.items() if us}


_timing = _Timing()


def enable(on: bool = True) -> None:
    """Turn stage timing on for this process (the runtime and the service call this from
    their settings)."""
    _timing.on = on


def enabled() -> bool:
    return _timing.on


@contextmanager
def timed(stage: str) -> Iterator[None]:
    if not _timing.on:
        yield
        return
    started = time.thread_time()
    try:
        yield
    finally:
        _timing.add(stage, time.thread_time() - started)


def take() -> dict[str, int]:
    return _timing.take()
