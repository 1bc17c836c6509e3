"""KeyStore: API keys in the database, as sha256 digests.

A key is `eq_` + 43 URL-safe characters (256 random bits), shown once when created. A
key this random cannot be guessed from its digest, so a fast hash is enough (a slow
password hash would only cost every request its time); the digest is the lookup key,
and the row found is compared again with `hmac.compare_digest`.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select, update

from embedq.errors import InvalidInput, NotFound
from embedq.models import ApiKey, Database
from embedq.tenants.principal import Principal, check_tenant, parse_scopes

log = logging.getLogger("embedq.audit")

KEY_PREFIX = "eq_"


def digest(key: str) -> str:
    """The stored form of a key: sha256 hex of its UTF-8 bytes."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class KeyInfo:
    """A key as listed: everything but the key itself."""

    id: str
    tenant: str
    name: str
    scopes: tuple[str, ...]
    rate_per_s: float | None
    texts_per_day: int | None
    created_at: datetime | None
    revoked_at: datetime | None

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "tenant": self.tenant, "name": self.name,
                "scopes": list(self.scopes), "rate_per_s": self.rate_per_s,
                "texts_per_day": self.texts_per_day,
                "created_at": self.created_at.isoformat() if self.created_at else None,
                "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None}


@dataclass(frozen=True)
class CreatedKey:
    key: str  # the clear key: shown once, stored nowhere
    info: KeyInfo


def _info(row: ApiKey) -> KeyInfo:
    return KeyInfo(row.id, row.tenant, row.name, tuple(row.scopes.split(",")),
                   row.rate_per_s, row.texts_per_day, row.created_at, row.revoked_at)


class KeyStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create(self, tenant: str, name: str | None = None, scopes: str | None = None,
               rate_per_s: float | None = None, texts_per_day: int | None = None
               ) -> CreatedKey:
        """A new key of `tenant` (default: every scope but admin)."""
        check_tenant(tenant)
        granted = parse_scopes(scopes or "embed,jobs,cache:read,cache:write")
        if rate_per_s is not None and not rate_per_s > 0:
            raise InvalidInput("--rate must be above 0 requests a second", "rate_per_s")
        if texts_per_day is not None and texts_per_day < 1:
            raise InvalidInput("--texts-per-day must be at least 1", "texts_per_day")
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        key_id = f"key_{uuid.uuid4().hex[:16]}"
        row = ApiKey(id=key_id, tenant=tenant, name=(name or key_id)[:255],
                     digest=digest(key), scopes=",".join(sorted(granted)),
                     rate_per_s=rate_per_s, texts_per_day=texts_per_day,
                     created_at=datetime.now(UTC))
        with self.db.session() as s:
            s.add(row)
        info = _info(row)
        log.info("key created id=%s tenant=%s name=%s scopes=%s", info.id, info.tenant,
                 info.name, ",".join(info.scopes))
        return CreatedKey(key, info)

    def list(self, tenant: str | None = None, revoked: bool = False) -> list[KeyInfo]:
        query = select(ApiKey).order_by(ApiKey.tenant, ApiKey.created_at)
        if tenant is not None:
            query = query.where(ApiKey.tenant == tenant)
        if not revoked:
            query = query.where(ApiKey.revoked_at.is_(None))
        with self.db.session() as s:
            return [_info(row) for row in s.scalars(query)]

    def revoke(self, key_id: str, tenant: str | None = None) -> KeyInfo:
        """Revoke a key by id (of `tenant`, when given); revoking twice is no error."""
        with self.db.session() as s:
            row = s.get(ApiKey, key_id)
            if row is None or (tenant is not None and row.tenant != tenant):
                raise NotFound(f"key {key_id!r} does not exist: `embedq keys list` shows "
                               "the ids")
            if row.revoked_at is None:
                s.execute(update(ApiKey).where(ApiKey.id == key_id)
                          .values(revoked_at=datetime.now(UTC)))
            s.flush()
            s.refresh(row)
            info = _info(row)
        log.info("key revoked id=%s tenant=%s name=%s", info.id, info.tenant, info.name)
        return info

    def any_active(self) -> bool:
        """Whether some key is not revoked: then the API requires keys."""
        with self.db.session() as s:
            return s.scalar(select(ApiKey.id).where(ApiKey.revoked_at.is_(None)).limit(1)) \
                is not None

    def principal(self, key: str) -> Principal | None:
        """The caller `key` stands for; None for an unknown or revoked key."""
        wanted = digest(key)
        with self.db.session() as s:
            row = s.scalar(select(ApiKey).where(ApiKey.digest == wanted))
        if row is None or row.revoked_at is not None \
                or not hmac.compare_digest(row.digest, wanted):
            return None
        return Principal(row.tenant, row.name, frozenset(row.scopes.split(",")), row.id,
                         row.rate_per_s, row.texts_per_day)
