"""With no servers configured, Client() runs the whole pipeline in-process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from embedq import Client
from embedq.config import Settings


def test_embedded_client_embeds_and_caches(tmp_path: Path) -> None:
    settings = Settings.from_env({"EMBEDQ_ENCODER": "hashing",
                                  "EMBEDQ_DATA_DIR": str(tmp_path)})
    assert settings.embedded
    client = Client(settings)
    texts = ["alpha", "beta", "alpha"]
    first = client.embed_detailed(texts)
    assert [o.source for o in first.outcomes] == ["computed", "computed", "computed"]
    vectors = first.vectors()
    np.testing.assert_array_equal(vectors[0], vectors[2])
    second = client.embed_detailed(texts)
    assert {o.source for o in second.outcomes} == {"hot"}
    stats = client.stats()
    assert stats["encoded"] >= 2 and stats["cache_hits"] >= 2
    assert (tmp_path / "embedq.db").exists()


def test_two_embedded_deployments_in_one_process_each_run_their_own_work(
        tmp_path: Path) -> None:
    """Each deployment has its own queues, store and worker: the second one's work is run
    by its own worker and lands in its own store (a task body bound to the first
    deployment's runtime would write there, and the second client would wait forever)."""
    clients = [
        Client(Settings.from_env({"EMBEDQ_ENCODER": "hashing",
                                  "EMBEDQ_DATA_DIR": str(tmp_path / name)}))
        for name in ("one", "two")
    ]
    try:
        for n, client in enumerate(clients):
            result = client.embed_detailed([f"text of client {n}"], timeout_s=20)
            assert result.outcomes[0].error is None, result.outcomes[0].error
            assert client.stats()["encoded"] == 1
            runtime = client.deployment.worker_runtime
            assert runtime is not None and runtime.hot is client.service.hot
    finally:
        for client in clients:
            client.close()


def test_embedded_bulk_runs_the_job_in_the_command(tmp_path: Path) -> None:
    """No servers: `embedq bulk` runs its own job (no worker outlives the command)."""
    import json
    import os
    import subprocess
    import sys

    src = tmp_path / "in.txt"
    src.write_text("".join(f"line {i}\n" for i in range(300)) + "line 0\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDQ_")}
    env.update({"EMBEDQ_ENCODER": "hashing", "EMBEDQ_DATA_DIR": str(tmp_path / "data")})
    run = subprocess.run([sys.executable, "-m", "embedq.cli", "bulk", str(src), "--json"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    state = json.loads(run.stdout)
    assert state["status"] == "succeeded"
    assert state["progress"]["done"] == 301 and state["progress"]["encoded"] == 300


def test_a_job_submitted_to_an_embedded_server_runs_to_the_end(tmp_path: Path) -> None:
    """`embedq serve` with no servers runs the jobs it accepts in its own process, and the
    OpenAI Batch API works on its SQLite database (whose driver reads timestamps back
    naive; `UTCDateTime` makes them aware)."""
    import os

    import httpx

    from embedq.models import JobStatus
    from tests.integration.test_api_support import ApiServer
    from tests.integration.test_batch_api import request_line, sdk, upload, wait_final
    from tests.support import wait_until

    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDQ_")}
    env.update({"EMBEDQ_ENCODER": "hashing", "EMBEDQ_DATA_DIR": str(tmp_path / "data")})
    with ApiServer(env, tmp_path / "api.log") as api:
        sent = httpx.post(api.url + "/v1/jobs",
                          json={"input": [f"job text {i}" for i in range(50)]}, timeout=30)
        assert sent.status_code == 202, sent.text
        job_id = sent.json()["id"]

        def state() -> dict[str, Any]:
            got: dict[str, Any] = httpx.get(f"{api.url}/v1/jobs/{job_id}", timeout=30).json()
            return got

        wait_until(lambda: state()["status"] in JobStatus.final(), 60, "the job ending")
        final = state()
        client = sdk(api)
        requests = upload(client, [request_line(f"r{i}", f"batch text {i}") for i in range(3)])
        batch = client.batches.create(input_file_id=requests.id, endpoint="/v1/embeddings",
                                      completion_window="24h")
        done = wait_final(client, batch.id, timeout_s=60)
    assert final["status"] == "succeeded" and final["progress"]["done"] == 50
    assert (done.status, done.request_counts.completed) == ("completed", 3)
