"""Credentials Redis refuses are said as such, with what to fix: no retry mends them, so
they are not reported as an unreachable server."""

from __future__ import annotations

import pytest

from embedq.coordination.redis_link import map_redis_errors, single_client
from embedq.errors import BrokerUnavailable

pytestmark = pytest.mark.integration


def test_a_user_redis_does_not_know_is_refused_credentials_not_unreachable(
        redis_url: str) -> None:
    wrong = redis_url.replace("redis://", "redis://embedq-no-such-user:secret@", 1)
    client = single_client(wrong, socket_timeout_s=2, connect_timeout_s=2)
    try:
        with pytest.raises(BrokerUnavailable) as caught, map_redis_errors():
            client.ping()
    finally:
        client.close()
    said = str(caught.value)
    assert "Redis refused the credentials of EMBEDQ_REDIS_URL" in said
    assert "fix the user and password" in said and "retry shortly" not in said
    assert "secret" not in said
