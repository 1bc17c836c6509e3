"""Who a request acts for: a tenant, the key's name, its scopes and its limits."""

from __future__ import annotations

import re
from dataclasses import dataclass

from embedq.errors import InvalidInput
from embedq.models import DEFAULT_TENANT

__all__ = ["ALL_SCOPES", "DEFAULT_TENANT", "SCOPES", "Principal", "check_tenant",
           "parse_scopes"]

# What each scope opens (docs/http-api.md, Keys and tenants).
SCOPES: dict[str, str] = {
    "embed": "POST /v1/embeddings and the text-embeddings-inference routes",
    "jobs": "/v1/jobs, /v1/files and /v1/batches of the key's tenant",
    "cache:read": "semantic-cache lookups and stats of the tenant's namespaces",
    "cache:write": "semantic-cache puts and deletes in the tenant's namespaces",
    "admin": "GET /metrics and the checks of GET /readyz",
}
ALL_SCOPES = frozenset(SCOPES)

_TENANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def check_tenant(name: str) -> str:
    """`name` if it can name a tenant; InvalidInput saying what can otherwise."""
    if not _TENANT_RE.match(name):
        raise InvalidInput(f"tenant {name!r} is not valid: use 1-64 letters, digits and "
                           ". _ - (starting with a letter or digit)", "tenant")
    return name


def parse_scopes(raw: str) -> frozenset[str]:
    """Comma-separated scopes, each one of SCOPES; InvalidInput naming an unknown one."""
    scopes = frozenset(s.strip() for s in raw.split(",") if s.strip())
    unknown = sorted(scopes - ALL_SCOPES)
    if unknown or not scopes:
        raise InvalidInput(f"scopes {raw!r} must list some of {', '.join(SCOPES)} "
                           f"(unknown: {', '.join(unknown) or 'none given'})", "scopes")
    return scopes


@dataclass(frozen=True)
class Principal:
    """The caller a key stands for. `key_id` is None for a bootstrap key (and for the
    open API, where `key_name` is "open")."""

    tenant: str
    key_name: str
    scopes: frozenset[str]
    key_id: str | None = None
    rate_per_s: float | None = None
    texts_per_day: int | None = None

    def allows(self, scope: str) -> bool:
        return scope in self.scopes

    @property
    def limiter_id(self) -> str:
        """The name rate limits are counted under (the key, not its secret)."""
        return self.key_id or f"{self.tenant}/{self.key_name}"

    @classmethod
    def everything(cls, key_name: str, tenant: str = DEFAULT_TENANT) -> Principal:
        """Every scope in `tenant`: bootstrap keys, the open API, local commands."""
        return cls(tenant, key_name, ALL_SCOPES)
