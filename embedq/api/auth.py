"""API keys: `Authorization: Bearer <key>`, compared in constant time.

With EMBEDQ_API_KEYS set (comma-separated), every route but /healthz and /readyz needs one
of the keys; unset, the API is open (and `embedq serve` says so when it starts). Routers
get the check by `dependencies=[Depends(require_api_key)]`; `create_app` adds it to every
router it includes, so feature routers need not repeat it.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from embedq.errors import Unauthorized

bearer = HTTPBearer(
    auto_error=False,
    description="One of the keys in EMBEDQ_API_KEYS (not needed when it is unset).",
)


def key_matches(given: str, keys: tuple[str, ...]) -> bool:
    """True if `given` equals one of `keys`; every key is compared, in constant time each."""
    raw = given.encode("utf-8", "surrogatepass")
    matched = False
    for key in keys:
        matched |= hmac.compare_digest(raw, key.encode("utf-8"))
    return matched


async def require_api_key(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    """Raise Unauthorized (HTTP 401) unless the request carries an accepted key."""
    keys: tuple[str, ...] = request.app.state.settings.api_keys
    if not keys:
        return
    if credentials is None:
        raise Unauthorized(
            "this API needs a key: send the header `Authorization: Bearer <key>` with one "
            "of the keys in the server's EMBEDQ_API_KEYS"
        )
    if not key_matches(credentials.credentials, keys):
        raise Unauthorized(
            "the API key is not accepted: use one of the keys in the server's EMBEDQ_API_KEYS"
        )
