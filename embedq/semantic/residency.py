"""Which namespaces this process holds in memory, within EMBEDQ_SEMANTIC_MEMORY_MB.

A namespace is held from its first lookup until it is the least recently used one past
the budget. Each held namespace has its change-log watermark (the follower reads the
changes past the lowest of them, locks.py); one that is not held costs nothing, not even
a poll. A held namespace counts its index's bytes plus HELD_BYTES (its bookkeeping, and
a bound on how many empty namespaces a process keeps). The namespace in use is never
dropped, so a single namespace larger than the budget is still served.

Pure bookkeeping, no index and no database: `IndexSync` asks it what to drop.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

HELD_BYTES = 4096
MB = 1024 * 1024


class Residency:
    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self.watermarks: OrderedDict[str, int] = OrderedDict()  # least recently used first
        self.loads = 0
        self.evictions = 0

    def __contains__(self, namespace: object) -> bool:
        return namespace in self.watermarks

    def __len__(self) -> int:
        return len(self.watermarks)

    def held(self) -> list[str]:
        return list(self.watermarks)

    def touch(self, namespace: str) -> bool:
        """Mark a held namespace the most recently used; False when it is not held."""
        if namespace not in self.watermarks:
            return False
        self.watermarks.move_to_end(namespace)
        return True

    def admit(self, namespace: str, watermark: int) -> None:
        """A namespace just loaded, exact at `watermark`."""
        self.watermarks[namespace] = watermark
        self.watermarks.move_to_end(namespace)
        self.loads += 1

    def drop(self, namespace: str) -> None:
        if self.watermarks.pop(namespace, None) is not None:
            self.evictions += 1

    def low_watermark(self) -> int:
        return min(self.watermarks.values(), default=0)

    def advance(self, watermark: int) -> None:
        """Every held namespace has read the log up to `watermark`."""
        for namespace, at in self.watermarks.items():
            if at < watermark:
                self.watermarks[namespace] = watermark

    def behind(self, namespace: str, seq: int) -> bool:
        """Whether the held `namespace` has yet to apply the change `seq`."""
        at = self.watermarks.get(namespace)
        return at is not None and seq > at

    def cost(self, sizes: Mapping[str, int]) -> int:
        """Bytes the held namespaces count: `sizes` are their indexes' (absent: empty)."""
        return sum(sizes.get(ns, 0) + HELD_BYTES for ns in self.watermarks)

    def over_budget(self, sizes: Mapping[str, int], keep: str | None = None) -> list[str]:
        """The least recently used namespaces to drop, in order, until the rest fit the
        budget; never `keep` (the one in use)."""
        total = self.cost(sizes)
        victims = []
        for namespace in self.watermarks:
            if total <= self.budget_bytes:
                break
            if namespace == keep:
                continue
            victims.append(namespace)
            total -= sizes.get(namespace, 0) + HELD_BYTES
        return victims
