"""Coordination between processes: claims, run leases, interest, outcomes, waiting.

Every process that computes or waits for a vector goes through this package:

- a **claim** is held by whoever queued a fingerprint's computation; whoever loses it
  joins the computation in flight. Winning a claim clears the failure an earlier
  computation left, so a new computation is never answered with an old error;
- a **run lease** is held by the execution running a fingerprint, so a redelivered copy
  of the same work waits instead of computing again;
- an **outcome** is a vector or a failure in the hot store (`outcomes`);
- **interest** says which callers still wait for a fingerprint (`interest`);
- a **wait** lasts until each fingerprint has an outcome or its holder is gone
  (`waiting`, with three named policies);
- the **executor** seam decides where a claimed miss is encoded (`executor`).

The hot store (`store`: the interface; `memory`, `redis_store`: the two stores) holds
all of it; key names (`layout`) and Lua scripts (`lua/`) stay inside the stores. On a
Redis Cluster the Redis store splits each call by the hash slot of its keys (`buckets`).
"""

from __future__ import annotations

from embedq.config import Settings
from embedq.coordination.memory import MemoryHotStore
from embedq.coordination.store import (
    BatchRecord,
    Claimed,
    Hold,
    HotStore,
    Interest,
    Leased,
    Settled,
)

__all__ = [
    "BatchRecord", "Claimed", "Hold", "HotStore", "Interest", "Leased", "MemoryHotStore",
    "Settled", "make_hot_store",
]


def make_hot_store(settings: Settings) -> HotStore:
    """Redis when configured; else a new in-process store (embedded mode: the deployment
    hands one store to its service and its worker)."""
    if settings.links.redis_url:
        from embedq.coordination.redis_store import RedisHotStore

        return RedisHotStore(settings.links.redis_url, settings.links.redis_socket_timeout_s,
                              settings.links.redis_connect_timeout_s)
    return MemoryHotStore()
