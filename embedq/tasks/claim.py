"""The claim: `SET claim:{fp} <task id> NX PX <ttl>`; whoever wins queues the work.

Celery does not dedupe task ids; this does. A claim outlives a dead leader only until its
ttl: waiters that find neither a claim nor a vector claim again and re-queue.
"""

from __future__ import annotations

from embedq.cache import HotStore, keys


def claim(hot: HotStore, fps: list[str], owner: str, ttl_ms: int) -> tuple[list[str], list[str]]:
    """Return (won, lost) fingerprints, in the order given."""
    results = hot.acquire([keys.claim(fp) for fp in fps], owner, ttl_ms)
    won = [fp for fp, ok in zip(fps, results, strict=True) if ok]
    lost = [fp for fp, ok in zip(fps, results, strict=True) if not ok]
    return won, lost


def orphaned(hot: HotStore, fps: list[str]) -> list[str]:
    """Fingerprints nobody holds a claim on any more."""
    holders = hot.holders([keys.claim(fp) for fp in fps])
    return [fp for fp, h in zip(fps, holders, strict=True) if h is None]


def release(hot: HotStore, fps: list[str], owner: str | None = None) -> None:
    hot.release([keys.claim(fp) for fp in fps], owner)
