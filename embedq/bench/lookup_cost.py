"""What the verifier costs a semantic lookup (`embedq bench threshold`'s cost lines): one
verification alone, and a whole lookup with the verifier on and off."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from embedq.bench.stats import percentile
from embedq.semantic.verify import Verifier

if TYPE_CHECKING:
    from embedq.bench.threshold import Pair
    from embedq.client import Client

LOOKUP_ROUNDS = 3  # timed lookups per pair and mode


def verify_cost(pairs: list[Pair], verifier: Verifier) -> dict[str, float]:
    """p50/p99 milliseconds one verification adds to a lookup in the band, its words'
    embeddings already in the exact cache (score_pairs verified every pair once)."""
    took = []
    for p in pairs:
        started = time.perf_counter()
        verifier.conflict(p.query, p.stored)
        took.append((time.perf_counter() - started) * 1000)
    return {"p50": round(percentile(took, 50), 3), "p99": round(percentile(took, 99), 3)}


def lookup_cost(pairs: list[Pair], client: Client) -> dict[str, dict[str, float]]:
    """p50/p99 milliseconds of a whole `SemanticCache.lookup` with the verifier on and off.

    Each pair's stored query is an entry in a namespace of its own (the cache's table and
    index, as configured: embedded, SQLite and FAISS); its query is looked up, so a
    lookup pays everything a served one does: the query's embedding (from the exact cache:
    each query is looked up once untimed first, as a repeated question is), the search,
    the rows, the guard, the verifier where on (spans cached), the negatives, and the
    hit's or miss's record. The two modes are two caches over the same table, timed
    alternately, LOOKUP_ROUNDS times per pair."""
    from embedq.semantic import SemanticCache

    on = client.semantic
    off = SemanticCache(client.service, on.settings.with_overrides(semantic_verify=False))
    try:
        for i, p in enumerate(pairs):
            on.put(f"bench-lookup-{i}", p.stored, {"pair": i})
        off.sync.catch_up()
        took: dict[str, list[float]] = {"verifier_on": [], "verifier_off": []}
        for timed in (False, *[True] * LOOKUP_ROUNDS):
            for i, p in enumerate(pairs):
                for mode, cache in (("verifier_on", on), ("verifier_off", off)):
                    started = time.perf_counter()
                    cache.lookup(f"bench-lookup-{i}", p.query)
                    if timed:
                        took[mode].append((time.perf_counter() - started) * 1000)
    finally:
        off.close(save=False)
    return {mode: {"p50": round(percentile(ms, 50), 3), "p99": round(percentile(ms, 99), 3),
                   "lookups": len(ms)} for mode, ms in took.items()}
