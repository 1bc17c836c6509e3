"""/readyz counts only workers that consume the online queue: a worker started with
`--queues` naming only the bulk queue serves no request, so the API is not ready."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests import support
from tests.integration.test_api_support import ApiServer

pytestmark = pytest.mark.integration


def test_a_worker_not_consuming_the_online_queue_does_not_make_the_api_ready(
        redis_url: str, pg_url: str, tmp_path: Path, salt: str) -> None:
    env = support.cluster_env(redis_url, pg_url, online_queue=f"online-ready-{salt}",
                              bulk_queue=f"bulk-ready-{salt}")
    bulk_only = support.WorkerProcess(env, tmp_path / "bulk.log", "--queues",
                                      f"bulk-ready-{salt}").start()
    both = None
    try:
        with ApiServer(env, tmp_path / "api.log") as api:
            ready = httpx.get(api.url + "/readyz", timeout=30)
            assert ready.status_code == 503, ready.text
            assert f"none consuming the online queue 'online-ready-{salt}'" in \
                ready.json()["checks"]["workers"], ready.text
            both = support.WorkerProcess(env, tmp_path / "both.log").start()
            support.wait_until(lambda: httpx.get(api.url + "/readyz", timeout=30
                                                 ).status_code == 200, 20, "ready")
    finally:
        bulk_only.stop()
        if both is not None:
            both.stop()
