"""Interest: which callers still wait for a fingerprint, each until its deadline.

A caller is one request; a `RequestGroup` is the requests one service call answers (a
coalesced group from the API's request coalescer, or one caller). The group's interest is
registered with its claims (`HotStore.claim(..., interest=group.interest(fps))`) and lasts
until the call's deadline; a request whose client went away leaves the group
(`leave`), and its interest is withdrawn (`HotStore.unwant`) by the thread waiting for the
call. Just before a batch encodes, a worker drops the texts nobody wants any more
(`HotStore.drop_unwanted`, counted as `abandoned`): work nobody waits for is not encoded.

Verbs, one family: a caller *wants* a fingerprint (registered with the claim), *unwants*
it when it leaves; a fingerprint some caller still here waits for is *wanted*; the rest
are *unwanted* and dropped.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable

from embedq.coordination.store import HotStore, Interest
from embedq.errors import Unavailable

log = logging.getLogger("embedq.coordination")


class RequestGroup:
    """The requests one service call answers, each owning a run of its inputs; which of
    them left while the call waits; and the call's claim owner, which its queued messages
    name.

    The API calls `leave(k)` when request k's client disconnects: safe from any thread,
    no I/O, it wakes the call's wait (`wake`), whose own thread then withdraws request
    k's interest (`unwant_departed`) and stops waiting for what no request still here
    wants. A request that timed out needs no withdrawal: its interest ends with its
    deadline (`bind`).
    """

    def __init__(self, sizes: list[int]) -> None:
        self.ids = [f"caller-{uuid.uuid4().hex[:16]}" for _ in sizes]
        self.owner = f"req-{uuid.uuid4().hex[:16]}"
        self.wake = threading.Event()
        self._of_input = [k for k, n in enumerate(sizes) for _ in range(n)]
        self._fps: list[str] = []
        self._deadline = 0.0
        self._gone: set[int] = set()
        self._unsettled: list[int] = []
        self._lock = threading.Lock()

    @classmethod
    def single(cls, n_inputs: int) -> RequestGroup:
        return cls([n_inputs])

    def bind(self, fps: list[str], deadline: float) -> None:
        """The call's fingerprints, one per input in input order, and its deadline
        (`time.monotonic()` seconds)."""
        if len(fps) != len(self._of_input):
            raise ValueError(f"{len(fps)} fingerprints for {len(self._of_input)} inputs")
        self._fps, self._deadline = list(fps), deadline

    def leave(self, k: int) -> None:
        with self._lock:
            if k not in self._gone:
                self._gone.add(k)
                self._unsettled.append(k)
        self.wake.set()

    def present(self) -> bool:
        """Every request of the group is still here (none left, the deadline not past), so
        each of its fingerprints is wanted, without asking the store. Safe from any
        thread, no I/O."""
        with self._lock:
            if self._gone:
                return False
        return bool(self._fps) and time.monotonic() < self._deadline

    def interest(self, fps: list[str]) -> Interest:
        """The interest of each request still here in `fps`, until the call's deadline."""
        ttl_ms = max(1, int((self._deadline - time.monotonic()) * 1000))
        return Interest(self._callers(set(fps), lambda k: k not in self._gone), ttl_ms)

    def wanted(self, fps: list[str]) -> list[str]:
        """Those of `fps` some request still here wants, in order."""
        with self._lock:
            if not self._gone:
                return fps
        callers = self._callers(set(fps), lambda k: k not in self._gone)
        return [fp for fp in fps if fp in callers]

    def unwant_departed(self, hot: HotStore, fps: list[str]) -> list[str]:
        """Withdraw the interest of the requests that left since the last call; return
        those of `fps` some request still here wants. A store error is logged, not
        raised: the interest still ends at the deadline."""
        with self._lock:
            left, self._unsettled = set(self._unsettled), []
        if left:
            try:
                hot.unwant(self._callers(set(self._fps), left.__contains__))
            except Unavailable as exc:
                log.warning("could not withdraw the interest of departed callers: %s", exc)
        return self.wanted(fps)

    def _callers(self, fps: set[str], keep: Callable[[int], bool]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        with self._lock:
            for fp, k in zip(self._fps, self._of_input, strict=True):
                if fp in fps and keep(k):
                    ids = out.setdefault(fp, [])
                    if self.ids[k] not in ids:
                        ids.append(self.ids[k])
        return out
