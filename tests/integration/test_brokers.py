"""RabbitMQ works as the broker by configuration alone."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import numpy as np
import pytest

from embedq.service import EmbeddingService
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
