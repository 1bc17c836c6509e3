"""Cache tiers: the hot store (Redis or in-process), the durable store, the semantic cache."""

from __future__ import annotations

from embedq.cache.durable import DurableStore, StoredVector, from_bytes, to_bytes
from embedq.cache.hot import HotStore, MemoryHotStore
from embedq.config import Settings

__all__ = [
    "DurableStore", "HotStore", "MemoryHotStore", "StoredVector", "from_bytes", "make_hot_store",
    "to_bytes",
]

def make_hot_store(settings: Settings) -> HotStore:
    """Redis when configured; else a new in-process store (embedded mode: the deployment
    hands one store to its service and its worker)."""
    if settings.redis_url:
        from embedq.cache.redis_hot import RedisHotStore

        return RedisHotStore(settings.redis_url, settings.redis_socket_timeout_s,
                              settings.redis_connect_timeout_s)
    return MemoryHotStore()
