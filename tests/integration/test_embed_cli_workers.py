"""`embedq embed` on a cluster says at once when no live worker will compute its texts
(it waited out EMBEDQ_REQUEST_TIMEOUT_S, 120 s, saying nothing), and nothing when one
will."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests import support
from tests.conftest import Cluster

pytestmark = pytest.mark.integration


def embed(env: dict[str, str], text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "embedq.cli", "embed", text],
                          env={**env, "EMBEDQ_REQUEST_TIMEOUT_S": "2"}, cwd=support.ROOT,
                          capture_output=True, text=True, timeout=120)


def test_a_live_worker_on_the_queue_says_nothing(cluster: Cluster, salt: str) -> None:
    run = embed(cluster.env, f"{salt} served")
    assert run.returncode == 0, run.stderr
    assert "warning" not in run.stderr


def test_no_worker_on_the_queue_is_said_before_the_wait(cluster: Cluster, salt: str) -> None:
    empty = support.SCRATCH_REDIS_URL  # a Redis database no worker heartbeats into
    run = embed({**cluster.env, "EMBEDQ_BROKER_URL": empty, "EMBEDQ_REDIS_URL": empty},
                f"{salt} nobody")
    assert run.returncode == 1
    assert ("embedq: warning: no live worker consumes the queue 'online': texts not yet "
            "cached wait up to 2 s (EMBEDQ_REQUEST_TIMEOUT_S) for one; start `embedq "
            "worker`") in run.stderr


def test_workers_serving_another_revision_are_named(cluster: Cluster, salt: str) -> None:
    run = embed({**cluster.env, "EMBEDQ_MODEL_REVISION": f"other-{salt}"}, f"{salt} other")
    assert run.returncode == 1
    model = support.settings_from(cluster.env).model.model
    warning = next(line for line in run.stderr.splitlines() if "warning" in line)
    assert f"not {model}@other-{salt}: start `embedq worker` with this shell's" in warning
