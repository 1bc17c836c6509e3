"""Table access for the semantic cache: entries, the change log, namespace counters.

Writers hold Postgres advisory locks for their transaction (locks.py): a write to one
namespace holds the namespace's lock (and its tenant's, for the tenant's caps), so one
namespace's changes get their `seq` numbers in commit order, while two tenants write at
once. Writes that span namespaces (the expiry sweep, pruning) and a put that creates a
namespace (the namespace counts) hold the global lock alone. A follower reads under the
shared side of the locks of the namespaces it holds (changes.py), which is what makes its
watermark exact. SQLite (embedded mode) has one writer anyway.

Change ops: "put" (entry added), "delete" (entry gone), "drop" (a whole namespace gone),
"pruned" (changes up to `entry_id` were removed from the log; older snapshots are stale).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import case, delete, func, select, update
from sqlalchemy.orm import Session

from embedq.errors import LimitReached, NotFound
from embedq.models import (
    DEFAULT_TENANT,
    Database,
    SemanticChange,
    SemanticEntry,
    SemanticNamespace,
)
from embedq.semantic.changes import Change, ChangeLogReads
from embedq.semantic.entries import (
    Entry,
    NamespaceLimitReached,
    PutResult,
    TenantCaps,
    entry_of,
    live_at,
    query_digest,
    utcnow,
)
from embedq.semantic.locks import LOCK_NOT_AVAILABLE, WRITE_LOCK_KEY, Scope, take

__all__ = [  # Change (changes.py) and the values (entries.py) still importable from here
    "LOCK_NOT_AVAILABLE", "SHARED_NAMES", "SWEEP_BATCH", "WRITE_LOCK_KEY", "Change", "Entry",
    "NamespaceLimitReached", "PutResult", "SemanticStore", "TenantCaps", "query_digest",
    "utcnow",
]

SWEEP_BATCH = 1000
# Namespace names are one space for all tenants (docs/http-api.md, Ownership): a 404 for
# another tenant's name says so, rather than pretend the name is free.
SHARED_NAMES = ("namespace names are one space shared by all tenants, and another tenant "
                "may hold this one: choose another name (e.g. prefixed with your tenant)")


class SemanticStore(ChangeLogReads):
    """The semantic cache's tables; the change log's reads are in changes.py."""

    def __init__(self, db: Database, *, scoped_locks: bool = True) -> None:
        """`scoped_locks=False`: every write takes the global lock alone, as before the
        per-namespace locks (the baseline of `embedq bench semantic --writers`)."""
        self.db = db
        self.scoped_locks = scoped_locks

    @contextlib.contextmanager
    def _writing(self, scope: Scope) -> Iterator[Session]:
        with self.db.session() as s:
            if self.db.dialect == "postgresql":
                take(s, scope, self.db.timeouts.lock_ms)
            yield s

    @contextlib.contextmanager
    def _writing_to(self, namespace: str, tenant: str | None
                    ) -> Iterator[tuple[Session, str | None]]:
        """A transaction holding the locks of a write to `namespace`: the shared global
        lock, `tenant`'s (its caps are counted under it; None for writes that only
        remove) and the namespace's. A namespace that does not exist (yet, or any more)
        is created under the global lock alone, so the transaction restarts under it
        (the namespace counts of all tenants are read there). Yields the session and
        the namespace's owner, read under the locks."""
        if self.scoped_locks:
            with self._writing(Scope.of(namespace, tenant)) as s:
                owner = self._owner(s, namespace)
                if owner is not None:
                    yield s, owner
                    return
        with self._writing(Scope.everything()) as s:
            yield s, self._owner(s, namespace)

    def _owner(self, s: Session, namespace: str) -> str | None:
        return s.scalar(select(SemanticNamespace.tenant)
                        .where(SemanticNamespace.namespace == namespace))

    def _log(self, s: Session, op: str, rows: list[tuple[int, str, str]]) -> None:
        for entry_id, namespace, space in rows:
            s.add(SemanticChange(entry_id=entry_id, namespace=namespace, space=space, op=op))

    # --- writes
    def put(
        self, *, namespace: str, model: str, space: str, query: str, vector: bytes,
        payload: Any, metadata: dict[str, Any], ttl_s: int | None, sliding: bool,
        max_entries: int, max_namespaces: int, tenant: str = DEFAULT_TENANT,
        caps: TenantCaps | None = None,
    ) -> PutResult:
        """Insert, or replace the payload of the same query text; evict past `max_entries`.

        A new namespace past `max_namespaces` (all tenants) or `caps.namespaces` (this
        tenant's) raises NamespaceLimitReached; a new entry past `caps.entries` live
        entries of the tenant raises LimitReached, unless it evicts one of its namespace's
        (at `max_entries`). Nothing stored is evicted to make room for a tenant's cap.
        Counts are read under the write lock, so concurrent puts cannot pass a cap
        together. A new namespace belongs to `tenant`; another tenant's raises NotFound."""
        now = utcnow()
        expires = now + timedelta(seconds=ttl_s) if ttl_s else None
        digest = query_digest(query)
        with self._writing_to(namespace, tenant) as (s, owner):
            if owner is not None and owner != tenant:
                raise NotFound(f"namespace {namespace!r} is not one of this tenant's: "
                               f"{SHARED_NAMES}")
            existing = s.scalar(select(SemanticEntry).where(
                SemanticEntry.namespace == namespace, SemanticEntry.space == space,
                SemanticEntry.query_sha256 == digest,
            ))
            if existing is not None:
                existing.payload, existing.meta = payload, metadata
                existing.ttl_s, existing.sliding, existing.expires_at = ttl_s, sliding, expires
                return PutResult(existing.id, False, [])
            if caps is not None:
                self._check_caps(s, namespace, tenant, caps, new_namespace=owner is None,
                                 adds_entry=owner is None or self._count(
                                     s, namespace, space) < max_entries, now=now, space=space)
            self.ensure_namespace(s, namespace, max_namespaces, tenant)
            row = SemanticEntry(
                namespace=namespace, model=model, space=space, query=query,
                query_sha256=digest, vector=vector, payload=payload, meta=metadata,
                created_at=now, expires_at=expires, ttl_s=ttl_s, sliding=sliding,
                hit_count=0, last_hit_at=None,
            )
            s.add(row)
            s.flush()
            self._log(s, "put", [(row.id, namespace, space)])
            evicted = self._evict(s, namespace, space, max_entries, now)
            return PutResult(row.id, True, evicted)

    @contextlib.contextmanager
    def writing(self, namespace: str | None = None, tenant: str | None = None
                ) -> Iterator[Session]:
        """A transaction holding the locks of a write to `namespace` by `tenant`, for
        writes made next to these (ensure_namespace, a namespace's policy); with no
        namespace, the exclusive global lock, for writes that span namespaces (carry.py)."""
        if namespace is None:
            with self._writing(Scope.everything()) as s:
                yield s
            return
        with self._writing_to(namespace, tenant) as (s, _):
            yield s

    def ensure_namespace(self, s: Session, namespace: str, max_namespaces: int,
                         tenant: str = DEFAULT_TENANT, caps: TenantCaps | None = None) -> None:
        """Create the namespace for `tenant` unless it exists, within `s` (which holds the
        writers' lock, so the counts are exact); NamespaceLimitReached past
        `max_namespaces` (all tenants) or `caps.namespaces` (this tenant's), NotFound when
        another tenant holds the name."""
        known_ns = s.get(SemanticNamespace, namespace)
        if known_ns is not None:
            if known_ns.tenant not in (tenant, None):
                raise NotFound(f"namespace {namespace!r} is not one of this tenant's: "
                               f"{SHARED_NAMES}")
            return
        if caps is not None:
            self._check_caps(s, namespace, tenant, caps, new_namespace=True, adds_entry=False,
                             now=utcnow())
        known = s.scalar(select(func.count()).select_from(SemanticNamespace)) or 0
        if known >= max_namespaces:
            raise NamespaceLimitReached(
                f"namespace {namespace!r} would be new, and {known} namespaces exist, "
                f"the limit (EMBEDQ_SEMANTIC_MAX_NAMESPACES={max_namespaces}): delete "
                "one no longer used (DELETE /v1/semantic-cache/{namespace}) or raise "
                "the limit", "namespace", setting="EMBEDQ_SEMANTIC_MAX_NAMESPACES",
            )
        s.add(SemanticNamespace(namespace=namespace, tenant=tenant, hits=0, misses=0))

    def _count(self, s: Session, namespace: str, space: str) -> int:
        return s.scalar(select(func.count()).where(SemanticEntry.namespace == namespace,
                                                   SemanticEntry.space == space)) or 0

    def _check_caps(self, s: Session, namespace: str, tenant: str, caps: TenantCaps, *,
                    new_namespace: bool, adds_entry: bool, now: datetime,
                    space: str = "") -> None:
        """LimitReached when one more entry (in a new namespace: one more namespace) would
        pass the tenant's caps; only the tenant's own namespaces, and its entries in
        `space` (another model's copies, carry.py, count for that model), count."""
        if new_namespace:
            owned = s.scalar(select(func.count()).select_from(SemanticNamespace)
                             .where(SemanticNamespace.tenant == tenant)) or 0
            if owned >= caps.namespaces:
                raise NamespaceLimitReached(
                    f"namespace {namespace!r} would be new, and tenant {tenant!r} owns "
                    f"{owned} namespaces, its limit (EMBEDQ_TENANT_MAX_NAMESPACES="
                    f"{caps.namespaces}): delete one no longer used (DELETE "
                    "/v1/semantic-cache/{namespace}) or have the operator raise "
                    "EMBEDQ_TENANT_MAX_NAMESPACES", "namespace",
                    setting="EMBEDQ_TENANT_MAX_NAMESPACES")
        if not adds_entry:
            return  # no entry, or one that evicts another of a full namespace: the count holds
        live = s.scalar(
            select(func.count()).select_from(SemanticEntry)
            .join(SemanticNamespace, SemanticNamespace.namespace == SemanticEntry.namespace)
            .where(SemanticNamespace.tenant == tenant, SemanticEntry.space == space,
                   live_at(now))) or 0
        if live >= caps.entries:
            raise LimitReached(
                f"tenant {tenant!r} keeps {live} live semantic-cache entries, its limit "
                f"(EMBEDQ_TENANT_MAX_ENTRIES={caps.entries}): delete entries or namespaces "
                "no longer used, put with a ttl_s so entries expire, or have the operator "
                "raise EMBEDQ_TENANT_MAX_ENTRIES", "query", setting="EMBEDQ_TENANT_MAX_ENTRIES")

    def _evict(self, s: Session, namespace: str, space: str, max_entries: int,
               now: datetime) -> list[int]:
        """Keep the namespace at `max_entries` in `space`: expired first, then least
        recently hit."""
        excess = self._count(s, namespace, space) - max_entries
        if excess <= 0:
            return []
        expired_first = case((live_at(now), 1), else_=0)
        recency = func.coalesce(SemanticEntry.last_hit_at, SemanticEntry.created_at)
        victims = s.execute(
            select(SemanticEntry.id, SemanticEntry.space)
            .where(SemanticEntry.namespace == namespace, SemanticEntry.space == space)
            .order_by(expired_first, recency, SemanticEntry.id)
            .limit(excess)
        ).all()
        ids = [v.id for v in victims]
        s.execute(delete(SemanticEntry).where(SemanticEntry.id.in_(ids)))
        self._log(s, "delete", [(v.id, namespace, v.space) for v in victims])
        return ids

    def owner(self, namespace: str) -> str | None:
        """The tenant of a namespace; None for one that holds nothing."""
        with self.db.session() as s:
            return s.scalar(select(SemanticNamespace.tenant)
                            .where(SemanticNamespace.namespace == namespace))

    def delete_entry(self, namespace: str, entry_id: int, tenant: str | None = None) -> bool:
        """False when there is no such entry (in `tenant`'s namespace, when given). Its
        counterparts in other models' spaces (same namespace and query: carry.py) go too,
        so an id from before `embedq models switch` deletes what it names everywhere."""
        with self._writing_to(namespace, tenant) as (s, owner):
            if tenant is not None and owner not in (tenant, None):
                return False
            row = s.get(SemanticEntry, entry_id)
            if row is None or row.namespace != namespace:
                return False
            rows = s.execute(select(SemanticEntry.id, SemanticEntry.space).where(
                SemanticEntry.namespace == namespace,
                SemanticEntry.query_sha256 == row.query_sha256)).all()
            s.execute(delete(SemanticEntry).where(SemanticEntry.id.in_([r.id for r in rows])))
            self._log(s, "delete", [(r.id, namespace, r.space) for r in rows])
            return True

    def drop_namespace(self, namespace: str, tenant: str | None = None) -> int:
        """Delete every entry of the namespace (one "drop" change); return how many.
        Another tenant's namespace (`tenant` given) raises NotFound."""
        with self._writing_to(namespace, tenant) as (s, owner):
            if tenant is not None and owner not in (tenant, None):
                raise NotFound(f"namespace {namespace!r} does not exist for this tenant "
                               f"({SHARED_NAMES})")
            gone = s.execute(delete(SemanticEntry).where(SemanticEntry.namespace == namespace))
            known = s.execute(
                delete(SemanticNamespace).where(SemanticNamespace.namespace == namespace)
            )
            removed = max(int(getattr(gone, "rowcount", 0) or 0), 0)
            if removed or getattr(known, "rowcount", 0):
                self._log(s, "drop", [(0, namespace, "")])
            return removed

    def sweep_expired(self, now: datetime | None = None) -> int:
        """Delete expired entries (in batches), logging each; return how many."""
        now = now or utcnow()
        total = 0
        with self.db.session() as s:  # most sweeps find nothing: no lock for those
            if s.scalar(select(SemanticEntry.id).where(SemanticEntry.expires_at <= now)
                        .limit(1)) is None:
                return 0
        while True:
            with self._writing(Scope.everything()) as s:
                rows = s.execute(
                    select(SemanticEntry.id, SemanticEntry.namespace, SemanticEntry.space)
                    .where(SemanticEntry.expires_at <= now).limit(SWEEP_BATCH)
                ).all()
                if not rows:
                    return total
                s.execute(delete(SemanticEntry).where(SemanticEntry.id.in_([r.id for r in rows])))
                self._log(s, "delete", [(r.id, r.namespace, r.space) for r in rows])
                total += len(rows)

    def prune_changes(self, retention_s: float) -> int:
        """Drop log rows older than `retention_s`, leaving a "pruned" marker; return the seq."""
        cutoff = utcnow() - timedelta(seconds=retention_s)
        with self.db.session() as s:  # most runs find nothing to prune: no lock for those
            if s.scalar(select(SemanticChange.seq).where(SemanticChange.created_at < cutoff,
                                                         SemanticChange.op != "pruned")
                        .limit(1)) is None:
                return 0
        with self._writing(Scope.everything()) as s:
            horizon = s.scalar(
                select(func.max(SemanticChange.seq)).where(SemanticChange.created_at < cutoff)
            )
            if horizon is None:
                return 0
            s.execute(delete(SemanticChange).where(SemanticChange.seq <= horizon))
            self._log(s, "pruned", [(int(horizon), "", "")])
            return int(horizon)

    # --- reads
    def live_entries(self, ids: list[int], now: datetime) -> dict[int, Entry]:
        if not ids:
            return {}
        with self.db.session() as s:
            rows = s.scalars(
                select(SemanticEntry).where(SemanticEntry.id.in_(ids), live_at(now))
            ).all()
            return {r.id: entry_of(r) for r in rows}

    def live_queries(self, ids: list[int], now: datetime) -> dict[int, str]:
        """The stored query of each live entry of `ids`, without its payload."""
        if not ids:
            return {}
        with self.db.session() as s:
            rows = s.execute(select(SemanticEntry.id, SemanticEntry.query).where(
                SemanticEntry.id.in_(ids), live_at(now))).all()
            return {entry_id: query for entry_id, query in rows}

    def exact_entry(self, namespace: str, space: str, query: str, now: datetime
                    ) -> Entry | None:
        with self.db.session() as s:
            row = s.scalar(select(SemanticEntry).where(
                SemanticEntry.namespace == namespace, SemanticEntry.space == space,
                SemanticEntry.query_sha256 == query_digest(query), live_at(now),
            ))
            return entry_of(row) if row is not None else None

    def record_lookup(self, namespace: str, hit_ids: list[int], now: datetime,
                      also: Callable[[Session], None] | None = None) -> None:
        """Count a hit or a miss; hits refresh recency and sliding expiry. `also` writes
        more in the same transaction (the served hits: one commit, not two)."""
        with self.db.session() as s:
            if also is not None:
                also(s)
            column = SemanticNamespace.hits if hit_ids else SemanticNamespace.misses
            s.execute(update(SemanticNamespace).where(SemanticNamespace.namespace == namespace)
                      .values({column: column + 1}))
            if not hit_ids:
                return
            s.execute(update(SemanticEntry).where(SemanticEntry.id.in_(hit_ids)).values(
                hit_count=SemanticEntry.hit_count + 1, last_hit_at=now,
            ))
            for row in s.scalars(select(SemanticEntry).where(
                SemanticEntry.id.in_(hit_ids), SemanticEntry.sliding.is_(True),
                SemanticEntry.ttl_s.is_not(None),
            )):
                row.expires_at = now + timedelta(seconds=row.ttl_s or 0)

    def stats(self, namespace: str, now: datetime, space: str | None = None
              ) -> dict[str, Any]:
        with self.db.session() as s:
            known = s.get(SemanticNamespace, namespace)
            where = [SemanticEntry.namespace == namespace, live_at(now)]
            if space is not None:
                where.append(SemanticEntry.space == space)
            entries = s.scalar(select(func.count()).where(*where)) or 0
            return {
                "namespace": namespace,
                "exists": known is not None,
                "entries": int(entries),
                "hits": int(known.hits) if known else 0,
                "misses": int(known.misses) if known else 0,
            }
