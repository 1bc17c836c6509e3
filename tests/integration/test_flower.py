"""Flower on a real Redis broker, started by the command compose's `flower` service runs:
its broker page and /api/queues/length answer (they were a 404, "'redis' broker is not
supported", while Celery's tools went through embedq's own transport), and the lengths
are those of the messages embedq's producers put on the embedq queues."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from embedq.tasks import names
from embedq.tasks.app import create_app
from embedq.testing.processes import free_port, stop, wait_http
from tests import support
from tests.compose import DOTENV, compose

pytestmark = pytest.mark.integration

AUTH = ("ops", "flower-pw")


@contextlib.contextmanager
def compose_flower(redis_url: str, queues: dict[str, str], log: Path) -> Iterator[str]:
    """compose's flower command on a free port, its broker and cache at `redis_url`;
    yields its base URL."""
    service = compose({**DOTENV, "FLOWER_BASIC_AUTH": ":".join(AUTH)})["services"]["flower"]
    argv = shlex.split(service["command"])  # compose splits a string command so
    assert argv[:2] == ["sh", "-c"] and "--port=5555" in argv[2]
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDQ_")}
    env.update(service["environment"], EMBEDQ_BROKER_URL=redis_url,
               EMBEDQ_REDIS_URL=redis_url, **queues,
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    with log.open("ab") as out:
        proc = subprocess.Popen(["sh", "-c", argv[2].replace("--port=5555", f"--port={port}")],
                                env=env, cwd=support.ROOT, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/api/queues/length", timeout_s=60, status=401)  # behind basic auth
        yield url
    finally:
        stop(proc)


def test_flower_reads_the_embedq_queues_on_redis(redis_url: str, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    online, bulk = f"flower-{tag}", f"flower-bulk-{tag}"
    queues = {"EMBEDQ_ONLINE_QUEUE": online, "EMBEDQ_BULK_QUEUE": bulk}
    # Messages put there by embedq's own app (its Redis transport), not consumed: no
    # worker serves these queues.
    producer = create_app(support.settings_from({"EMBEDQ_BROKER_URL": redis_url,
                                                 "EMBEDQ_REDIS_URL": redis_url, **queues}))
    for _ in range(3):
        producer.send_task(names.EMBED, args=[], queue=online)
    for _ in range(2):
        producer.send_task(names.BULK_CHUNK, args=[], queue=bulk)

    with compose_flower(redis_url, queues, tmp_path / "flower.log") as url, \
            _deleted(redis_url, online, bulk):
        lengths = httpx.get(url + "/api/queues/length", auth=AUTH, timeout=30)
        assert lengths.status_code == 200, lengths.text
        got = {q["name"]: q["messages"] for q in lengths.json()["active_queues"]}
        assert got == {online: 3, bulk: 2}
        page = httpx.get(url + "/broker", auth=AUTH, timeout=30)
        assert page.status_code == 200, page.text[:300]
        assert online in page.text and bulk in page.text


@contextlib.contextmanager
def _deleted(redis_url: str, *keys: str) -> Iterator[None]:
    import redis

    try:
        yield
    finally:
        redis.Redis.from_url(redis_url).delete(*keys)
