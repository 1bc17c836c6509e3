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
    def __init__(self, hot: HotStore) -> None:
        self._events: dict[str, set[threading.Event]] = {}
        self._lock = threading.Lock()
        hot.subscribe(self.notify)

    def register(self, fps: Iterable[str], event: threading.Event) -> None:
        with self._lock:
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
