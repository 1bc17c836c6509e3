"""Every storage key name embedq uses in Redis (or the embedded store), in one place.

Only the stores (and the tenants' rate limits and quotas, which are Redis scripts of their
own) use these names: everything above them speaks in fingerprints.

On a Redis Cluster a script may only touch keys of one hash slot, so each fingerprint's
keys (claim, run lease, vector, failure, interest, attempts) carry its bucket's hash tag,
`embedq:{7}:claim:<fp>`, and so do the stats hash and "done" channel that the bucket's
scripts write (`bucket_tag`). On one Redis the tag is empty: the names are those of a single
Redis, unchanged (docs/redis.md).
"""

from __future__ import annotations

import zlib

PREFIX = "embedq"
# Hash-tag buckets on a Redis Cluster: a batch costs one script call per bucket it
# touches, so few enough that a batch stays a handful of calls per master, enough that
# they spread over the masters and a failover moves a small share of the fingerprints.
# On 3 masters (`embedq bench scale --cluster`, one loaded run): claiming 64 fingerprints
# cost 1.6x / 1.3x / 2.4x one Redis with 8 / 16 / 32 buckets, a batch of 64 2.0x / 1.8x /
# 2.9x; at 1,000 all three were 0.7-1.5x.
CLUSTER_BUCKETS = 16


def bucket(fp: str, buckets: int) -> int:
    """The bucket of a fingerprint among `buckets` (0 when there is one)."""
    return zlib.crc32(fp.encode()) % buckets if buckets > 1 else 0


def bucket_tag(bucket_: int, buckets: int) -> str:
    """The hash tag of a bucket's keys, with its separator: empty on one Redis."""
    return f"{{{bucket_}}}:" if buckets > 1 else ""


# A fingerprint's keys are `kind_prefix(kind, tag) + fp`. The scripts that handle many
# fingerprints (lua/) take that prefix and the fingerprints joined by commas (`packed`),
# and form the names themselves: a call costs the client one argument, not one per key
# (512 leases: 5.3 -> 0.3 us of client CPU a fingerprint). Their one declared key is the
# bucket's stats hash, whose hash tag every name they form shares: on a Redis Cluster the
# call goes to the slot's master and touches that slot only.
VECTOR, FAILURE, CLAIM, RUN, INTEREST, ATTEMPTS = "vec", "err", "claim", "run", "want", "attempts"


def kind_prefix(kind: str, tag: str = "") -> str:
    """Every name of one kind in one bucket is this prefix and a fingerprint."""
    return f"{PREFIX}:{tag}{kind}:"


def packed(fps: list[str]) -> str:
    """Fingerprints (hex digests) as one script argument. An empty one, or one with a
    comma, would shift every reply after it onto the wrong fingerprint: refused."""
    joined = ",".join(fps)
    if joined.count(",") != max(len(fps) - 1, 0) or "" in fps:
        odd = [f for f in fps if not f or "," in f][:3]
        raise ValueError(f"fingerprints are hex digests, not {odd}")
    return joined


def vector(fp: str, tag: str = "") -> str:
    """Hot-store copy of a finished vector (float32 bytes)."""
    return kind_prefix(VECTOR, tag) + fp


def failure(fp: str, tag: str = "") -> str:
    """Why a fingerprint failed (JSON), kept briefly so every waiter learns it."""
    return kind_prefix(FAILURE, tag) + fp


def claim(fp: str, tag: str = "") -> str:
    """Dedup claim: held by whoever queued the computation, for at most claim_ttl_ms."""
    return kind_prefix(CLAIM, tag) + fp


def held(hold: str, fp: str, tag: str = "") -> str:
    """A claim or a run lease (`Hold`'s value: claim, run)."""
    return kind_prefix(hold, tag) + fp


def run_lease(fp: str, tag: str = "") -> str:
    """Held by the worker executing a fingerprint; a duplicate delivery waits on it."""
    return kind_prefix(RUN, tag) + fp


def interest(fp: str, tag: str = "") -> str:
    """Callers still waiting for a fingerprint (sorted set: caller id scored by the epoch ms
    its wait ends); work nobody waits for any more is not encoded."""
    return kind_prefix(INTEREST, tag) + fp


def attempts(fp: str, tag: str = "") -> str:
    """How many times a worker started encoding a fingerprint (dead-letter count)."""
    return kind_prefix(ATTEMPTS, tag) + fp


def stats(tag: str = "") -> str:
    """The counters hash (`store.COUNTERS`); on a cluster one per bucket, summed on read."""
    return f"{PREFIX}:{tag}stats"


def histogram(name: str) -> str:
    """Cluster-wide histogram (hash of bucket counts, sum, count), e.g. batch sizes."""
    return f"{PREFIX}:hist:{name}"


# Hash: process id -> JSON {"at": epoch s, "top": {kind: [[key, count], ...]}}, one field
# per process that published its heavy hitters (coordination/hot_keys.py).
HOT_KEYS = f"{PREFIX}:hotkeys"


def chunk_progress(job_id: str) -> str:
    """Hash: chunk number -> items of that running chunk with a vector so far."""
    return f"{PREFIX}:progress:{job_id}"


def done_channel(tag: str = "") -> str:
    """Where finished fingerprints are announced (comma-separated); on a cluster one
    sharded channel per bucket (SPUBLISH reaches only the master of its slot)."""
    return f"{PREFIX}:{tag}done"


# Hash: worker id -> JSON {"until": epoch s, "info": heartbeat}; a heartbeat past its
# `until` is dead (readers drop it).
WORKERS = f"{PREFIX}:workers"


def rate_bucket(limiter_id: str) -> str:
    """An API key's token bucket (tokens, last refill), shared by every API process."""
    return f"{PREFIX}:rate:{limiter_id}"


def daily_texts(limiter_id: str, day: str) -> str:
    """How many texts an API key sent on one UTC day (`YYYY-MM-DD`), shared by every API
    process; it expires a day after that day ends."""
    return f"{PREFIX}:texts:{limiter_id}:{day}"
