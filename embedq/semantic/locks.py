"""The semantic cache's Postgres advisory locks: who may write the change log at once.

Three kinds, all held to the end of a transaction:
  global      WRITE_LOCK_KEY. Every writer takes it: shared by a write to one namespace,
              exclusive by writes that span namespaces (the expiry sweep, pruning) and by
              a put that creates a namespace (the namespace counts are read under it).
  tenant      exclusive, by a write to one of the tenant's namespaces: the tenant's caps
              (namespaces, live entries) are counted under it, so two of its puts cannot
              pass a cap together; two tenants' writes run at once.
  namespace   exclusive by its writers, shared by its followers (changes.py). A
              namespace's lock is one of NAMESPACE_STRIPES, chosen by a hash of its name:
              a follower holding thousands of namespaces takes at most that many locks
              (each takes a slot of Postgres's shared lock table, sized by
              max_locks_per_transaction), and two namespaces on one stripe only write
              one after the other.

Why a follower's watermark stays exact: a change's `seq` is drawn inside its writer's
transaction, under its namespace's lock (or the exclusive global one). A follower takes
the shared global lock and the shared lock of every namespace it holds, then reads
max(seq) and the changes up to it: while it holds them, no writer of those namespaces is
between its `seq` and its commit, so every change of theirs up to max(seq) is committed and
read, and any later one draws a larger `seq`. Another namespace's change may still commit
late below that watermark; the follower does not hold that namespace, and when it loads
it, the load reads the namespace under the same locks.

Lock order, so no two transactions wait on each other: global, then tenant, then the
namespaces in stripe order. The two-key form (class, 32-bit key) keeps tenant and
namespace keys apart from WRITE_LOCK_KEY's one-key space; two tenants on one hash only
share a lock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from embedq.errors import DatabaseUnavailable

WRITE_LOCK_KEY = 0x656D62_5345  # "emb" "SE": the global lock of every semantic-cache writer
TENANT_CLASS = 0x53_54  # "ST"
NAMESPACE_CLASS = 0x53_4E  # "SN"
NAMESPACE_STRIPES = 64
LOCK_NOT_AVAILABLE = "55P03"  # SQLSTATE of a wait past lock_timeout


def key_of(name: str) -> int:
    """A name's 32-bit signed lock key."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:4], "big",
                          signed=True)


def stripe_of(namespace: str) -> int:
    """The namespace's lock, one of NAMESPACE_STRIPES."""
    return key_of(namespace) % NAMESPACE_STRIPES


@dataclass(frozen=True)
class Scope:
    """The locks one transaction takes: the global one (exclusive or shared), and,
    exclusively (a writer) or shared (a follower), a tenant's and namespaces'."""

    exclusive: bool
    tenant: str | None = None
    namespaces: tuple[str, ...] = ()
    shared: bool = False  # the tenant's and namespaces' locks: shared (a follower)

    @classmethod
    def everything(cls) -> Scope:
        return cls(exclusive=True)

    @classmethod
    def of(cls, namespace: str, tenant: str | None) -> Scope:
        return cls(exclusive=False, tenant=tenant, namespaces=(namespace,))

    @classmethod
    def following(cls, namespaces: Iterable[str]) -> Scope:
        return cls(exclusive=False, namespaces=tuple(namespaces), shared=True)


def take(s: Session, scope: Scope, lock_ms: int) -> None:
    """Take `scope`'s locks in order; a wait past lock_timeout is DatabaseUnavailable."""
    try:
        if scope.exclusive:
            s.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": WRITE_LOCK_KEY})
            return
        # One statement, one round trip: a select list is evaluated left to right, so
        # the locks are taken in the order above.
        how = "pg_advisory_xact_lock_shared" if scope.shared else "pg_advisory_xact_lock"
        calls = ["pg_advisory_xact_lock_shared(:g)"]
        params: dict[str, int] = {"g": WRITE_LOCK_KEY, "tc": TENANT_CLASS,
                                  "nc": NAMESPACE_CLASS}
        if scope.tenant is not None:
            calls.append(f"{how}(:tc, :t)")
            params["t"] = key_of(scope.tenant)
        for i, key in enumerate(sorted({stripe_of(n) for n in scope.namespaces})):
            calls.append(f"{how}(:nc, :n{i})")
            params[f"n{i}"] = key
        s.execute(text(f"SELECT {', '.join(calls)}"), params)
    except OperationalError as exc:
        if getattr(exc.orig, "sqlstate", None) != LOCK_NOT_AVAILABLE:
            raise
        raise DatabaseUnavailable(
            f"the semantic cache's write lock stayed busy past lock_timeout "
            f"({lock_ms} ms, EMBEDQ_DB_LOCK_TIMEOUT_MS): other writes are queued; retry "
            "shortly", retry_after_s=1,
        ) from exc
