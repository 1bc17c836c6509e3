"""Authenticator: a presented key -> the Principal it stands for, or None.

The bootstrap keys (EMBEDQ_API_KEYS) are compared in constant time, every one of them;
other keys are looked up by digest in the KeyStore. Lookups (found or not) are cached
per process for `ttl_s`, at most one second: a revoked key stops working within that
time in every API process, and a flood of requests with one key costs the database one
query a second: the requests that arrive while a lookup runs wait for its answer (or its
error) instead of each running its own (`_SharedReads`).

Keyed is a state that only closes. The API is open (`required` is False) only while this
process has seen no key at all: no bootstrap key, and no active key in the database yet.
Once it has seen one it requires keys until it is restarted, even when every key is
revoked later: then it accepts none (`without_active_key` says so, for the 401's message
and the log), rather than turning open to anyone. A database that cannot be read is not
"no keys" (before its first answer; after it, its last answer stands while it is down).
"""

from __future__ import annotations

import hmac
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from embedq.errors import ConfigError, Unavailable
from embedq.tenants.keys import KeyStore, digest
from embedq.tenants.principal import Principal

log = logging.getLogger("embedq.audit")

MAX_TTL_S = 1.0
CACHE_ENTRIES = 10_000  # distinct keys remembered; unknown ones are cached too

T = TypeVar("T")


def match_index(given: str, keys: tuple[bytes, ...]) -> int:
    """1 + the index of the key `given` equals, or 0. Every key is compared, in constant
    time each, so the time taken does not say which one matched or how much of it."""
    raw = given.encode("utf-8", "surrogatepass")
    found = 0
    for n, candidate in enumerate(keys, 1):
        if hmac.compare_digest(raw, candidate):
            found = n
    return found


class _SharedReads:
    """One database read per name at a time: a caller that asks while the read runs gets
    its outcome, the value or the error, instead of reading again. Under 50 concurrent
    requests an expired answer was read once per request that arrived before the first
    read returned; and when the database is down, the callers fail with the first read
    rather than each waiting out its own timeout. For threads (the API asks from its
    thread pool); `embedq.singleflight` is its asyncio counterpart."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, Future[object]] = {}

    def read(self, name: str, read: Callable[[], T]) -> T:
        with self._lock:
            running = self._running.get(name)
            mine = running is None
            if running is None:
                running = self._running[name] = Future()
        if not mine:
            return running.result()  # type: ignore[return-value]  # read()'s value
        try:
            value = read()
        except BaseException as exc:
            running.set_exception(exc)
            raise
        finally:
            with self._lock:
                del self._running[name]
        running.set_result(value)
        return value


class Authenticator:
    def __init__(self, bootstrap: tuple[str, ...], store: KeyStore | None,
                 ttl_s: float = MAX_TTL_S) -> None:
        if not 0 <= ttl_s <= MAX_TTL_S:
            raise ConfigError(f"the key cache ttl must be within [0, {MAX_TTL_S}] s, so "
                              "revocation takes effect within a second")
        self.bootstrap = tuple(k.encode("utf-8") for k in bootstrap)
        self.store = store
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._reads = _SharedReads()
        self._cache: OrderedDict[str, tuple[float, Principal | None]] = OrderedDict()
        self._required: tuple[float, bool] | None = None
        self._keyed = bool(self.bootstrap)  # set once, never cleared: see the docstring
        self._active: tuple[float, bool] | None = None  # whether some key is active

    def required_known(self) -> bool | None:
        """`required()` when it needs no database query (the API asks this on its event
        loop, and only goes to a thread for the query); None when it does."""
        if self._keyed:
            return True
        if self.store is None:
            return False
        cached = self._required
        if cached is not None and time.monotonic() - cached[0] < self.ttl_s:
            return cached[1]
        return None

    def known(self, key: str) -> tuple[bool, Principal | None]:
        """(True, `authenticate(key)`) when that needs no database query (a bootstrap key,
        a cached lookup), else (False, None)."""
        principal = self._bootstrap(key)
        if principal is not None or self.store is None:
            return True, principal
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(digest(key))
        if cached is not None and now - cached[0] < self.ttl_s:
            return True, cached[1]
        return False, None

    def required(self) -> bool:
        """Whether requests must carry a key (cached like lookups)."""
        known = self.required_known()
        if known is not None:
            return known
        assert self.store is not None
        now = time.monotonic()
        cached = self._required
        if cached is not None and now - cached[0] < self.ttl_s:
            return cached[1]
        try:
            needed = self._reads.read("required", self.store.any_active)
        except Unavailable:
            if cached is None:
                raise  # never read: fail closed (503) rather than guess "open"
            # The database is down: what it said last still holds (an open API stays
            # open, so the hot store keeps answering; a keyed one keeps requiring keys).
            return cached[1]
        self._required = (now, needed)
        if needed and not self._keyed:
            self._keyed = True
            log.info("API keys exist: every request but the probes now needs one, until "
                     "this process is restarted")
        return needed

    def without_active_key(self) -> bool:
        """Whether this keyed process has no key left to accept: no bootstrap key and no
        active key in the database (every one revoked). Asked when a request is refused;
        cached like lookups; a database that cannot be read says nothing (False)."""
        if not self._keyed or self.bootstrap or self.store is None:
            return False
        now = time.monotonic()
        cached = self._active
        if cached is None or now - cached[0] >= self.ttl_s:
            try:
                cached = (now, self.store.any_active())
            except Unavailable:
                return False
            self._active = cached
        return not cached[1]

    def _bootstrap(self, key: str) -> Principal | None:
        found = match_index(key, self.bootstrap)
        return Principal.everything(f"bootstrap-{found}") if found else None

    def authenticate(self, key: str) -> Principal | None:
        known, principal = self.known(key)
        if known:
            return principal
        assert self.store is not None  # known() settles every key when there is none
        cache_key = digest(key)
        now = time.monotonic()
        store = self.store
        principal = self._reads.read(cache_key, lambda: store.principal(key))
        with self._lock:
            self._cache[cache_key] = (now, principal)
            self._cache.move_to_end(cache_key)
            while len(self._cache) > CACHE_ENTRIES:
                self._cache.popitem(last=False)
        return principal
