"""Every storage key name embedq uses in Redis (or the embedded store), in one place.

Only the stores (and the tenants' rate limits and quotas, which are Redis scripts of their
own) use these names: everything above them speaks in fingerprints."""

from __future__ import annotations

PREFIX = "embedq"


def vector(fp: str) -> str:
    """Hot-store copy of a finished vector (float32 bytes)."""
    return f"{PREFIX}:vec:{fp}"


def failure(fp: str) -> str:
    """Why a fingerprint failed (JSON), kept briefly so every waiter learns it."""
    return f"{PREFIX}:err:{fp}"


def claim(fp: str) -> str:
    """Dedup claim: held by whoever queued the computation, for at most claim_ttl_ms."""
    return f"{PREFIX}:claim:{fp}"


def held(hold: str, fp: str) -> str:
    """A claim or a run lease (`Hold`'s value: claim, run)."""
    return f"{PREFIX}:{hold}:{fp}"


def run_lease(fp: str) -> str:
    """Held by the worker executing a fingerprint; a duplicate delivery waits on it."""
    return f"{PREFIX}:run:{fp}"


def interest(fp: str) -> str:
    """Callers still waiting for a fingerprint (sorted set: caller id scored by the epoch ms
    its wait ends); work nobody waits for any more is not encoded."""
    return f"{PREFIX}:want:{fp}"


def attempts(fp: str) -> str:
    """How many times a worker started encoding a fingerprint (dead-letter count)."""
    return f"{PREFIX}:attempts:{fp}"


STATS = f"{PREFIX}:stats"


def histogram(name: str) -> str:
    """Cluster-wide histogram (hash of bucket counts, sum, count), e.g. batch sizes."""
    return f"{PREFIX}:hist:{name}"


# Hash: process id -> JSON {"at": epoch s, "top": {kind: [[key, count], ...]}}, one field
# per process that published its heavy hitters (coordination/hot_keys.py).
HOT_KEYS = f"{PREFIX}:hotkeys"


def chunk_progress(job_id: str) -> str:
    """Hash: chunk number -> items of that running chunk with a vector so far."""
    return f"{PREFIX}:progress:{job_id}"


DONE_CHANNEL = f"{PREFIX}:done"
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
