"""The semantic cache's values as the store hands them out: an entry, a put's result, a
tenant's caps; and the time and digest helpers every reader of the tables shares."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from embedq.errors import LimitReached
from embedq.models import SemanticEntry


class NamespaceLimitReached(LimitReached):
    """A put would create a namespace past EMBEDQ_SEMANTIC_MAX_NAMESPACES, or past the
    tenant's EMBEDQ_TENANT_MAX_NAMESPACES (HTTP 409)."""


@dataclass(frozen=True)
class TenantCaps:
    """What one tenant may keep: namespaces it owns, live entries in all of them."""

    namespaces: int
    entries: int


def utcnow() -> datetime:
    return datetime.now(UTC)


def query_digest(query: str) -> str:
    return hashlib.sha256(query.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Entry:
    id: int
    namespace: str
    query: str
    payload: Any
    metadata: dict[str, Any]
    created_at: datetime
    expires_at: datetime | None
    hit_count: int
    last_hit_at: datetime | None


@dataclass(frozen=True)
class PutResult:
    id: int
    created: bool
    evicted: list[int]


def entry_of(row: SemanticEntry) -> Entry:
    return Entry(
        id=row.id, namespace=row.namespace, query=row.query, payload=row.payload,
        metadata=dict(row.meta or {}), created_at=row.created_at,
        expires_at=row.expires_at, hit_count=row.hit_count, last_hit_at=row.last_hit_at,
    )


def live_at(now: datetime) -> Any:
    """The condition of an entry not expired at `now`."""
    return (SemanticEntry.expires_at.is_(None)) | (SemanticEntry.expires_at > now)
