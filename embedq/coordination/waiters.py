"""Per-process registry of threads waiting for fingerprints to finish.

One subscription to the hot store's "done" notifications per process wakes exactly the
waiters whose fingerprints finished; waiters also poll, so a lost notification (a Redis
restart) only costs latency.
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
        self._subscribed = False
        if eager:
            self._subscribe()

    def _subscribe(self) -> None:
        self._subscribed = True
        self._hot.subscribe(self.notify)

    def register(self, fps: Iterable[str], event: threading.Event) -> None:
        """Wake `event` when any of `fps` is done. A lazy subscription starts here: a
        process that never waits (a worker without redeliveries) does not read every
        "done" notification of the cluster."""
        with self._lock:
            if not self._subscribed:
                self._subscribe()
            for fp in fps:
                self._events.setdefault(fp, set()).add(event)

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
