"""What an operator sees at each process's default log level (no --loglevel given): the
API process logs who computed a request's texts (leader lines), the worker logs each
batch it encoded."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from embedq.service import EmbeddingService
from tests import support
from tests.conftest import Cluster
from tests.faults.procs import wait_until

pytestmark = pytest.mark.integration

READY = "loaded+warmed"  # the runtime is up; the message waits for the consumer


def start(env: dict[str, str], log: Path, *args: str) -> subprocess.Popen[bytes]:
    """An `embedq` command at its default log level."""
    assert "EMBEDQ_LOGLEVEL" not in env
    return subprocess.Popen([sys.executable, "-m", "embedq.cli", *args], env=env,
                            stdout=log.open("ab"), stderr=subprocess.STDOUT,
                            start_new_session=True, cwd=support.ROOT)


def stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


def up(url: str) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(url + "/healthz", timeout=2).status_code == 200
    return False


def test_serve_logs_leader_lines_at_its_default_level(
    cluster: Cluster, salt: str, tmp_path: Path
) -> None:
    port = support.free_port()
    log = tmp_path / "serve.log"
    proc = start(cluster.env, log, "serve", "--host", "127.0.0.1", "--port", str(port))
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: up(url), 60, "embedq serve answering")
        got = httpx.post(url + "/v1/embeddings", json={"input": [f"{salt} logged"]}, timeout=60)
        assert got.status_code == 200, got.text
        wait_until(lambda: "leader finish: 1 fingerprints" in log.read_text(), 10,
                   "the leader line in the serve log")
    finally:
        stop(proc)
    text = log.read_text()
    assert "INFO embedq.service: leader start" in text
    assert "DEBUG" not in text  # only the service's lines were raised to INFO


def test_worker_logs_each_batch_at_its_default_level(
    redis_url: str, pg_url: str, salt: str, tmp_path: Path
) -> None:
    env = support.cluster_env(redis_url, pg_url, online_queue=f"logs-{salt}",
                              bulk_queue=f"logs-bulk-{salt}")
    log = tmp_path / "worker.log"
    proc = start(env, log, "worker")
    try:
        deadline = time.monotonic() + 60
        result = None
        while result is None and time.monotonic() < deadline and proc.poll() is None:
            if READY in log.read_text():
                result = EmbeddingService(support.settings_from(env)).embed([f"{salt} batch"])
            else:
                time.sleep(0.1)
        assert result is not None and result.outcomes[0].vector is not None, log.read_text()
        wait_until(lambda: "batch done texts=1" in log.read_text(), 10,
                   "the batch line in the worker log")
    finally:
        stop(proc)
