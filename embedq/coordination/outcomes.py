"""Outcomes: a fingerprint's vector (float32 bytes) or its failure, as every process sees
them in the hot store.

A vector is stored (durable, then hot) before it is announced: its claim freed and a
"done" notification published, in one round trip. A failure is kept `failure_ttl_s`, so
every waiter of that computation learns it; the next claim won clears it.
"""

from __future__ import annotations

import logging

from embedq.coordination.store import BatchRecord, Failure, HotStore, failures_of
from embedq.errors import (
    EmbeddingFailed,
    EmbedqError,
    InvalidVector,
    PoisonText,
    UpstreamError,
)

log = logging.getLogger("embedq.coordination")

_FAILURE_TYPES: dict[str, type[EmbedqError]] = {
    "EmbeddingFailed": EmbeddingFailed,
    "InvalidVector": InvalidVector,
    "PoisonText": PoisonText,
    "UpstreamError": UpstreamError,
}


def decode_failure(info: Failure, fp: str) -> EmbedqError:
    """A stored failure as the error it was (EmbeddingFailed when the type is unknown)."""
    kind = _FAILURE_TYPES.get(info.get("type", ""), EmbeddingFailed)
    message = info.get("message", "embedding failed")
    if issubclass(kind, EmbeddingFailed):
        return kind(message, fp)
    return kind(message)


def describe(error: BaseException) -> str:
    """One line for a failed item (jobs store it per item): `Type: message`."""
    return f"{type(error).__name__}: {error}"


def publish_vectors(hot: HotStore, vectors: dict[str, bytes], ttl_s: int, *,
                    wanted_only: bool = False) -> None:
    """Vectors found or computed outside a batch write (already durable): hot copies (with
    `wanted_only`, only where a caller waits: bulk work), claims freed, waiters woken, in
    one round trip."""
    if not vectors:
        return
    hot.record_batch(BatchRecord(
        vectors=[] if wanted_only else [(vectors, ttl_s)],
        wanted=vectors if wanted_only else {}, wanted_ttl_s=ttl_s,
        free_claims=list(vectors), done=sorted(vectors)))


def announce(hot: HotStore, fps: list[str]) -> None:
    """Fingerprints whose vectors the hot store already holds: claims freed, waiters
    woken."""
    if fps:
        hot.record_batch(BatchRecord(free_claims=list(fps), done=sorted(fps)))


def publish_failures(hot: HotStore, failures: dict[str, BaseException], ttl_s: int,
                     counts: dict[str, int] | None = None) -> None:
    """Failures, kept `ttl_s` so every waiter learns them; claims freed, waiters woken,
    `failed` (and `counts`) counted, in one round trip."""
    if not failures:
        return
    hot.record_batch(BatchRecord(
        failures=failures_of(failures), failure_ttl_s=ttl_s, free_claims=list(failures),
        done=sorted(failures), counts={"failed": len(failures), **(counts or {})}))
    for fp, e in failures.items():
        log.warning("failed fp=%s: %s", fp[:12], e)


def read_outcomes(hot: HotStore, fps: list[str]
                  ) -> tuple[dict[str, bytes], dict[str, EmbedqError], list[str]]:
    """(vectors, failures as the errors they were, still pending) in one round trip."""
    got = hot.settled(fps)
    return got.vectors, {fp: decode_failure(f, fp) for fp, f in got.failures.items()}, \
        got.pending
