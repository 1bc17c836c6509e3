"""RabbitMQ works as the broker by configuration alone."""

from __future__ import annotations

import base64
import json
import os
import socket
from pathlib import Path

import numpy as np
import pytest
from redis import Redis

from embedq.fingerprint import EncodeSpec
from embedq.service import EmbeddingService
from embedq.tasks.app import create_app
from embedq.tasks.publish import publish_embed
from tests import support

pytestmark = pytest.mark.integration
AMQP_URL = os.environ.get("EMBEDQ_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")


def check_rabbitmq() -> None:
    try:
        socket.create_connection(("127.0.0.1", 5672), timeout=2).close()
    except OSError as exc:
        support.require("RabbitMQ", exc)


def test_rabbitmq_as_broker(redis_url: str, pg_url: str, tmp_path: Path, salt: str) -> None:
    check_rabbitmq()
    env = support.cluster_env(redis_url, pg_url, online_queue=f"amqp-online-{salt}",
                              bulk_queue=f"amqp-bulk-{salt}")
    env["EMBEDQ_BROKER_URL"] = AMQP_URL
    worker = support.WorkerProcess(env, tmp_path / "worker.log").start()
    try:
        service = EmbeddingService(support.settings_from(env))
        texts = [f"{salt} via rabbit {i}" for i in range(20)]
        result = service.embed(texts, timeout_s=60)
        vectors = result.vectors()
        assert len(vectors) == 20
        assert all(np.isclose(np.linalg.norm(v), 1.0, atol=1e-5) for v in vectors)
        assert [o.source for o in result.outcomes] == ["computed"] * 20
    finally:
        worker.stop()


def test_queued_messages_keep_the_texts_out_of_their_summary(redis_url: str, salt: str
                                                             ) -> None:
    """A message's `argsrepr` (what worker logs and monitors such as Flower show) names
    how many texts it carries, not the texts themselves; the body still has them."""
    queue = f"repr-{salt}"
    settings = support.settings_from(support.cluster_env(redis_url, "", online_queue=queue))
    app = create_app(settings)
    text = f"{salt} a private sentence"
    publish_embed(app, EncodeSpec("hashing", "hashing-v2"), [[("f" * 64, text)]], queue)
    client = Redis.from_url(settings.links.broker_url)
    try:
        raw = client.lpop(queue)
    finally:
        client.delete(queue)
        client.close()
    assert raw is not None
    message = json.loads(raw)
    assert message["headers"]["argsrepr"] == "<1 texts, spec hashing>"
    assert text not in json.dumps(message["headers"])
    assert text in base64.b64decode(message["body"]).decode()


def test_a_published_message_leaves_the_result_backend_alone(redis_url: str, salt: str
                                                             ) -> None:
    """An embed message's outcome reaches its callers through the hot store: publishing it
    neither subscribes the producer to the task's result channel nor asks for a result,
    which were two Redis commands a message (subscribe, then unsubscribe)."""
    queue = f"noresult-{salt}"
    settings = support.settings_from(support.cluster_env(redis_url, "", online_queue=queue))
    app = create_app(settings)
    client = Redis.from_url(settings.links.broker_url)
    try:
        before = client.pubsub_numsub(*(f"celery-task-meta-{'e' * 64}",))
        publish_embed(app, EncodeSpec("hashing", "hashing-v2"),
                      [[("e" * 64, f"{salt} a text")]], queue, ids=["e" * 64])
        raw = client.lpop(queue)
        after = client.pubsub_numsub(f"celery-task-meta-{'e' * 64}")
    finally:
        client.delete(queue)
        client.close()
    assert raw is not None
    assert json.loads(raw)["headers"]["ignore_result"] is True
    assert app.backend.result_consumer.subscribed_to == set()
    assert after == before == [(b"celery-task-meta-" + b"e" * 64, 0)]


def _wrong_login(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://embedq-no-such-user:wrong@{rest.rpartition('@')[2]}"


@pytest.mark.parametrize("broker", ["amqp", "redis"])
def test_a_login_the_broker_refuses_is_said_with_what_to_fix(redis_url: str, salt: str,
                                                             broker: str) -> None:
    """RabbitMQ's refusal (py-amqp's AccessRefused, no kombu error) ended `embedq embed`
    in a traceback; Redis's read as an unreachable broker to retry."""
    from embedq.errors import BrokerUnavailable

    if broker == "amqp":
        check_rabbitmq()
    env = support.cluster_env(redis_url, "", online_queue=f"login-{salt}")
    env["EMBEDQ_BROKER_URL"] = _wrong_login(AMQP_URL if broker == "amqp" else redis_url)
    app = create_app(support.settings_from(env))
    with pytest.raises(BrokerUnavailable) as caught:
        publish_embed(app, EncodeSpec("hashing", "hashing-v2"), [[("f" * 64, "t")]],
                      f"login-{salt}", budget_s=2)
    said = str(caught.value)
    assert "the broker refused the login of EMBEDQ_BROKER_URL" in said
    assert "fix the user and password" in said and "wrong" not in said


@pytest.mark.parametrize("command", [["worker"], ["serve"]],
                         ids=["worker", "serve"])
def test_worker_and_serve_refuse_to_start_on_a_refused_login(
        redis_url: str, pg_url: str, command: list[str]) -> None:
    """Before the model loads: the worker ended in Celery's traceback, serve started and
    answered every request 503."""
    import subprocess
    import sys

    check_rabbitmq()
    env = {**support.cluster_env(redis_url, pg_url), "EMBEDQ_BROKER_URL": _wrong_login(AMQP_URL),
           "EMBEDQ_ENCODER": "hashing"}
    if command == ["serve"]:
        command = ["serve", "--port", str(support.free_port())]
    run = subprocess.run([sys.executable, "-m", "embedq.cli", *command], env=env,
                         capture_output=True, text=True, timeout=60, cwd=support.ROOT)
    assert run.returncode == 2, run.stderr[-2000:]
    assert "embedq: error: the broker refused the login of EMBEDQ_BROKER_URL" in run.stderr
    assert "Traceback" not in run.stderr
