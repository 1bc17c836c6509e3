"""Keyed is a state that only closes, on each transport: an `embedq serve` and an
`embedq mcp --transport http` that started with keys (in Postgres only: no
EMBEDQ_API_KEYS) keep refusing callers when the last key is revoked, instead of turning
open to anyone, and say so in the 401 and in their log; a new key is accepted again within
a second, and only a restart with no key opens them (on loopback)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import support
from tests.integration.test_api_support import ApiServer
from tests.integration.test_tenants import cli, create_key, mcp_server

pytestmark = pytest.mark.integration

NO_ACTIVE = "no API key is active"


@pytest.fixture(scope="module")
def env(redis_url: str) -> Iterator[dict[str, str]]:
    support.check_postgres()
    with support.temporary_database() as pg_url:
        yield support.cluster_env(redis_url, pg_url, online_queue="online-authcloses",
                                  bulk_queue="bulk-authcloses")


def revoke_every_key(env: dict[str, str]) -> None:
    listed = cli(env, "keys", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    for key in json.loads(listed.stdout):
        assert cli(env, "keys", "revoke", key["id"]).returncode == 0


def status(url: str, key: str | None, method: str = "GET", **kw: object) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.request(method, url, headers=headers, timeout=30, **kw)  # type: ignore[arg-type]


def test_serve_refuses_everyone_but_the_probes_once_its_last_key_is_revoked(
        env: dict[str, str], tmp_path: Path) -> None:
    key = create_key(env, "acme", "embed,jobs")
    with ApiServer(env, tmp_path / "serve.log") as api:
        models = f"{api.url}/v1/models"
        assert status(models, key).status_code == 200
        assert status(models, None).status_code == 401
        revoke_every_key(env)
        # The key is refused as revoked first; that no key is active at all is read on the
        # server's next refresh of its key set.
        support.wait_until(lambda: status(models, key).status_code == 401
                           and NO_ACTIVE in status(models, key).text, 5,
                           "the revoked key refused as no key being active")
        for caller in (None, key, "garbage", "eq_" + "x" * 43):
            refused = status(models, caller)
            assert refused.status_code == 401, (caller, refused.text)
            assert NO_ACTIVE in refused.json()["error"]["message"]
        job = status(f"{api.url}/v1/jobs", None, "POST", json={"input": ["x"]})
        assert job.status_code == 401
        tei = status(f"{api.url}/embed", None, "POST", json={"inputs": "x"})
        assert tei.status_code == 401 and NO_ACTIVE in tei.json()["error"]
        assert status(f"{api.url}/healthz", None).status_code == 200
        assert status(f"{api.url}/readyz", None).status_code != 401
        support.wait_until(lambda: NO_ACTIVE in api.log(), 5, "the refusal logged")
        again = create_key(env, "acme", "embed")
        support.wait_until(lambda: status(models, again).status_code == 200, 5,
                           "a new key accepted")
        assert status(models, None).status_code == 401
    revoke_every_key(env)
    # Only a deliberate restart with no key opens it (and only on loopback, checked then).
    with ApiServer(env, tmp_path / "serve-open.log") as api:
        assert status(f"{api.url}/v1/models", None).status_code == 200


def test_mcp_over_http_refuses_everyone_once_its_last_key_is_revoked(
        env: dict[str, str], tmp_path: Path) -> None:
    key = create_key(env, "acme", "embed,jobs")
    log = tmp_path / "mcp.log"
    with mcp_server(env, log) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        assert status(url, key, "POST", json={}).status_code != 401
        assert status(url, None, "POST", json={}).status_code == 401
        revoke_every_key(env)
        support.wait_until(lambda: status(url, key, "POST", json={}).status_code == 401, 5,
                           "the revoked key refused")
        for caller in (None, key, "garbage"):
            refused = status(url, caller, "POST", json={})
            assert refused.status_code == 401, refused.text
            assert NO_ACTIVE in refused.json()["error"]["message"]
        support.wait_until(lambda: NO_ACTIVE in log.read_text(errors="replace"), 5,
                           "the refusal logged")
        again = create_key(env, "acme", "embed")
        support.wait_until(lambda: status(url, again, "POST", json={}).status_code != 401, 5,
                           "a new key accepted")
    revoke_every_key(env)
