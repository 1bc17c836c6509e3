"""Per-process registry of threads waiting for fingerprints to finish.

One subscription to the hot store's "done" notifications per process wakes exactly the
waiters whose fingerprints finished; waiters also poll, so a lost notification (a Redis
restart) only costs latency. A lazy registry subscribes for the fingerprints registered,
so on a Redis Cluster a worker listens only to the buckets it waits on.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from embedq.coordination.store import HotStore


class Waiters:
    def __init__(self, hot: HotStore, *, eager: bool = True) -> None:
        """`eager`: subscribe now (a service, which waits on every miss, must hear the
        first notification); else on the first registration."""
        self._hot = hot
        self._events: dict[str, set[threading.Event]] = {}
        self._lock = threading.Lock()
        self._eager = eager
        if eager:
            self._hot.subscribe(self.notify)  # every bucket

    def register(self, fps: Iterable[str], event: threading.Event) -> None:
        """Wake `event` when any of `fps` is done. A lazy subscription starts (or grows)
        here: a process that never waits (a worker without redeliveries) does not read
        every "done" notification of the cluster."""
        fps = list(fps)
        with self._lock:
            for fp in fps:
                self._events.setdefault(fp, set()).add(event)
        if not self._eager:
            self._hot.subscribe(self.notify, fps)

    def unregister(self, fps: Iterable[str], event: threading.Event) -> None:
        with self._lock:
            for fp in fps:
                events = self._events.get(fp)
                if events is not None:
                    events.discard(event)
                    if not events:
                        del self._events[fp]

    def notify(self, fps: list[str]) -> None:
        with self._lock:
            woken = {e for fp in fps for e in self._events.get(fp, ())}
        for event in woken:
            event.set()
