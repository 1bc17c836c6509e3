"""The hot store (Redis or in-process): vectors, claims, leases, counters, notifications."""

from __future__ import annotations

from embedq.cache.hot import HotStore, MemoryHotStore
from embedq.config import Settings

__all__ = ["HotStore", "MemoryHotStore", "make_hot_store"]


def make_hot_store(settings: Settings) -> HotStore:
    """Redis when configured; else a new in-process store (embedded mode: the deployment
    hands one store to its service and its worker)."""
    if settings.redis_url:
        from embedq.cache.redis_hot import RedisHotStore

        return RedisHotStore(settings.redis_url, settings.redis_socket_timeout_s,
                              settings.redis_connect_timeout_s)
    return MemoryHotStore()
