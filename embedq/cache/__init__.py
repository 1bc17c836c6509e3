"""Cache tiers: the hot store (Redis or in-process), the durable store, the semantic cache."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from embedq.cache.hot import HotStore, MemoryHotStore
from embedq.config import Settings

if TYPE_CHECKING:
    from embedq.cache.durable import DurableStore, StoredVector, from_bytes, to_bytes

__all__ = [
    "DurableStore", "HotStore", "MemoryHotStore", "StoredVector", "from_bytes", "make_hot_store",
    "to_bytes",
]

_DURABLE = ("DurableStore", "StoredVector", "from_bytes", "to_bytes")


def __getattr__(name: str) -> Any:
    # The durable tier needs SQLAlchemy: imported on first use, so the semantic index
    # (semantic/index.py) imports without it (`embedq bench gpu` on a GPU machine).
    if name in _DURABLE:
        from embedq.cache import durable

        return getattr(durable, name)
    raise AttributeError(f"module 'embedq.cache' has no attribute {name!r}")


def make_hot_store(settings: Settings) -> HotStore:
    """Redis when configured; else a new in-process store (embedded mode: the deployment
    hands one store to its service and its worker)."""
    if settings.redis_url:
        from embedq.cache.redis_hot import RedisHotStore

        return RedisHotStore(settings.redis_url, settings.redis_socket_timeout_s,
                              settings.redis_connect_timeout_s)
    return MemoryHotStore()
