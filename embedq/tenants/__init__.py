"""Tenants and their API keys: who is calling, what they may do, and how much.

A key belongs to one tenant and carries scopes (`principal.SCOPES`) and optional limits.
Keys live in the database, as digests (`keys.KeyStore`); the bootstrap keys of
EMBEDQ_API_KEYS belong to the tenant "default" with every scope. `Authenticator` turns a
presented key into a `Principal`, caching lookups for at most a second, so a revoked key
stops working within a second in every process.
"""

from embedq.tenants.authenticator import Authenticator
from embedq.tenants.keys import CreatedKey, KeyInfo, KeyStore
from embedq.tenants.principal import (
    ALL_SCOPES,
    DEFAULT_TENANT,
    SCOPES,
    Principal,
    check_tenant,
    parse_scopes,
)

__all__ = [
    "ALL_SCOPES", "DEFAULT_TENANT", "SCOPES", "Authenticator", "CreatedKey", "KeyInfo",
    "KeyStore", "Principal", "check_tenant", "parse_scopes",
]
