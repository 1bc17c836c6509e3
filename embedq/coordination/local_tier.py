"""The in-process memory tier: the last vectors this process read or received, in front
of the hot store.

A fingerprint names one model, revision, text and output shape, so its vector never
changes: a copy held here needs no invalidation, only a bound. The tier is an LRU bounded
by the bytes of the vectors it holds (EMBEDQ_LOCAL_TIER_MB; 0 turns it off); a hot text
asked for by many sessions is answered without a round trip to Redis, and every process
counts how often that happened (`embedq_local_tier_*` on /metrics).

It holds only finished vectors, never claims or failures: what coordinates processes stays
in the hot store. Thread-safe; every call costs one lock and a dict operation per
fingerprint.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable

MB = 1 << 20


class LocalTier:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(0, max_bytes)
        self._lock = threading.Lock()
        self._lru: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    @classmethod
    def of_mb(cls, mb: int) -> LocalTier:
        return cls(mb * MB)

    @property
    def on(self) -> bool:
        return self.max_bytes > 0

    def get_many(self, fps: Iterable[str]) -> dict[str, bytes]:
        """The vectors held for `fps` (each found one becomes the most recently used)."""
        if not self.on:
            return {}
        found: dict[str, bytes] = {}
        asked = 0
        with self._lock:
            for fp in fps:
                asked += 1
                blob = self._lru.get(fp)
                if blob is not None:
                    self._lru.move_to_end(fp)
                    found[fp] = blob
            self.hits += len(found)
            self.misses += asked - len(found)
        return found

    def put_many(self, vectors: dict[str, bytes]) -> None:
        """Hold these vectors, dropping the least recently used past the bound. A vector
        larger than the whole bound is not held."""
        if not self.on or not vectors:
            return
        with self._lock:
            for fp, blob in vectors.items():
                if len(blob) > self.max_bytes:
                    continue
                old = self._lru.pop(fp, None)
                if old is not None:
                    self._bytes -= len(old)
                self._lru[fp] = blob
                self._bytes += len(blob)
            while self._bytes > self.max_bytes:
                _, dropped = self._lru.popitem(last=False)
                self._bytes -= len(dropped)
                self.evictions += 1

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "entries": len(self._lru),
                    "bytes": self._bytes, "max_bytes": self.max_bytes,
                    "evictions": self.evictions}


__all__ = ["LocalTier"]
