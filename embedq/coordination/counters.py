"""Request counters written behind the answers.

Counting a request is a Redis round trip that nothing in the request waits for: on a
sequential miss it was 0.5 ms of a 14 ms answer (docs/history.md, "One thread runs
the model; counters behind the answer"). `CounterWriter.add` merges the counts into a
pending total and returns; one thread writes whatever is pending in one command, at most
one write every PACE_S: an idle process's counts go out within a millisecond, a busy
one's in at most 1/PACE_S writes a second, not one for each round trip's worth of
requests (written as fast as the round trips went, the thread's writes held 2% of
`serve`'s interpreter samples under 50 clients of cache hits, and a process with the
interpreter to itself made 1,654 writes a second).

Readers in this process see their own requests: `flush` waits for what was added before
it (the service's `stats`, /metrics, and process exit call it). A store that is down
loses the counts of that write (logged), as a request's own increment did before: they
are statistics, and a request must not fail or wait for them. A store held in this
process (embedded mode, tests) is written inline: there is no round trip to save.

The same writer publishes this process's hot keys (`hot_keys.HotKeys`) at most every
PUBLISH_S with the counts it writes, and at every `flush`.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import uuid
from collections import Counter

from embedq.coordination.hot_keys import PUBLISH_S, HotKeys
from embedq.coordination.store import HotStore
from embedq.errors import Unavailable

log = logging.getLogger("embedq.counters")

FLUSH_S = 5.0  # the longest a reader (or process exit) waits for pending counts
PACE_S = 0.02  # the least time between two writes, unless a reader waits for them


class CounterWriter:
    def __init__(self, hot: HotStore, hot_keys: HotKeys | None = None) -> None:
        self.hot = hot
        self.hot_keys = hot_keys
        self.process_id = uuid.uuid4().hex
        self._published_at = time.monotonic()
        self.behind = hot.remote
        self._cond = threading.Condition()
        self._pending: Counter[str] = Counter()
        self._added = 0  # additions so far
        self._written = 0  # additions written (or given up on)
        self._waiting = 0  # readers in `flush`: the writer does not pace for them
        self._wrote_at = float("-inf")
        self._thread: threading.Thread | None = None
        self._closed = False

    def add(self, counts: dict[str, int]) -> None:
        counts = {k: v for k, v in counts.items() if v}
        if not counts:
            return
        if not self.behind:
            self._write(counts)
            self._publish_when_due()
            return
        with self._cond:
            idle = not self._pending  # else the writer is awake, or pacing: let it be
            self._pending.update(counts)
            self._added += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="embedq-counters",
                                                daemon=True)
                self._thread.start()
                atexit.register(self.flush)
            if idle:
                self._cond.notify_all()

    def flush(self, timeout_s: float = FLUSH_S) -> bool:
        """Wait until every count added so far is written; False if that took too long."""
        with self._cond:
            target = self._added
            self._waiting += 1
            self._cond.notify_all()  # a pacing writer writes now
            try:
                done = self._cond.wait_for(lambda: self._written >= target,
                                           timeout=timeout_s)
            finally:
                self._waiting -= 1
        self._publish()
        return done

    def close(self) -> None:
        self.flush()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending or self._closed)
                self._cond.wait_for(lambda: self._closed or self._waiting > 0,
                                    timeout=self._wrote_at + PACE_S - time.monotonic())
                if not self._pending:
                    return
                counts, self._pending = dict(self._pending), Counter()
                upto = self._added
                self._wrote_at = time.monotonic()
            try:
                self._write(counts)
                self._publish_when_due()
            except Exception:  # the thread must outlive one bad write
                log.exception("request counters not recorded")
            with self._cond:
                self._written = upto
                self._cond.notify_all()

    def _publish_when_due(self) -> None:
        if time.monotonic() - self._published_at >= PUBLISH_S:
            self._publish()

    def _publish(self) -> None:
        if self.hot_keys is None:
            return
        self._published_at = time.monotonic()
        top = self.hot_keys.top()
        if not any(top.values()):
            return
        try:
            self.hot.publish_hot_keys(self.process_id, top)
        except Unavailable as exc:
            log.warning("hot keys not published: %s", exc)

    def _write(self, counts: dict[str, int]) -> None:
        try:
            self.hot.incr(counts)
        except Unavailable as exc:
            log.warning("request counters not recorded: %s", exc)
