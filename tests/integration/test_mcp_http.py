"""`embedq mcp --transport http` as a process, every tool called through the official MCP
client's streamable-HTTP transport."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mcp import Client

from embedq.jobs.service import JobService
from tests import support
from tests.conftest import Cluster
from tests.integration.test_mcp import expected, payload

pytestmark = pytest.mark.integration


def wait_listening(port: int, proc: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"embedq mcp exited early:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"embedq mcp not listening in {timeout_s}s:\n{log.read_text()[-3000:]}")


def test_every_tool_over_streamable_http(cluster: Cluster, salt: str, tmp_path: Path) -> None:
    job_id = JobService(cluster.service()).submit([f"{salt} http job {i}" for i in range(3)],
                                                  priority="online")
    port = support.free_port()
    log = tmp_path / "mcp.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "embedq.cli", "mcp", "--transport", "http", "--port", str(port)],
        env=cluster.env, cwd=support.ROOT, stdout=log.open("ab"), stderr=subprocess.STDOUT,
        start_new_session=True)

    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=60) as client:
            out["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
            out["one"] = payload(await client.call_tool("embed_text", {"text": f"{salt} h1"}))
            out["many"] = payload(await client.call_tool(
                "embed_texts", {"texts": [f"{salt} ha", f"{salt} hb"]}))
            out["stored"] = payload(await client.call_tool("semantic_cache_store", {
                "namespace": f"http{salt}", "query": f"{salt} where is the invoice",
                "payload": {"answer": "billing page"}}))
            out["hit"] = payload(await client.call_tool("semantic_cache_lookup", {
                "namespace": f"http{salt}", "query": f"{salt} where is the invoice"}))
            for _ in range(150):
                out["job"] = payload(await client.call_tool("job_status", {"job_id": job_id}))
                if out["job"]["status"] == "succeeded":
                    break
                await asyncio.sleep(0.2)
        return out

    try:
        wait_listening(port, proc, log, 60)
        out = asyncio.run(session())
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    assert out["tools"] == ["embed_text", "embed_texts", "job_status", "list_models",
                            "semantic_cache_feedback", "semantic_cache_lookup",
                            "semantic_cache_store"]
    np.testing.assert_allclose(out["one"]["embedding"], expected(f"{salt} h1"),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["many"]["data"][1]["embedding"], expected(f"{salt} hb"),
                               rtol=1e-5, atol=1e-6)
    assert out["hit"]["hit"] is True
    assert out["hit"]["matches"][0]["id"] == out["stored"]["id"]
    assert out["job"]["status"] == "succeeded" and out["job"]["progress"]["done"] == 3
