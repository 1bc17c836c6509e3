"""A real MCP client session over stdio calling each of embedq's tools."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import numpy as np
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from embedq.encoders.hashing import HashingEncoder
from embedq.jobs.service import JobService
from tests import support
from tests.conftest import Cluster

pytestmark = pytest.mark.integration


def payload(result: Any) -> Any:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


def expected(text: str) -> np.ndarray:
    raw = HashingEncoder().encode([text])[0]
    return raw / np.linalg.norm(raw)


def test_every_tool_over_stdio(cluster: Cluster, salt: str) -> None:
    job_id = JobService(cluster.service()).submit([f"{salt} job text {i}" for i in range(5)],
                                                  priority="online")
    params = StdioServerParameters(command=sys.executable, args=["-m", "embedq.cli", "mcp"],
                                   env=cluster.env, cwd=str(support.ROOT))

    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(params, read_timeout_seconds=60) as client:
            tools = await client.list_tools()
            out["tools"] = sorted(t.name for t in tools.tools)
            out["one"] = payload(await client.call_tool("embed_text",
                                                        {"text": f"{salt} mcp one"}))
            out["many"] = payload(await client.call_tool(
                "embed_texts", {"texts": [f"{salt} mcp a", f"{salt} mcp b"]}))
            out["stored"] = payload(await client.call_tool("semantic_cache_store", {
                "namespace": f"ns{salt}", "query": f"{salt} how do I reset my password",
                "payload": {"answer": "use the reset link"}}))
            out["hit"] = payload(await client.call_tool("semantic_cache_lookup", {
                "namespace": f"ns{salt}", "query": f"{salt} how do I reset my password"}))
            out["feedback"] = payload(await client.call_tool("semantic_cache_feedback", {
                "namespace": f"ns{salt}", "hit_id": out["hit"]["matches"][0]["hit_id"],
                "correct": True}))
            out["unknown_hit"] = await client.call_tool("semantic_cache_feedback", {
                "namespace": f"ns{salt}", "hit_id": "0" * 32, "correct": False})
            out["empty"] = await client.call_tool("embed_text", {"text": ""})
            for _ in range(100):
                out["job"] = payload(await client.call_tool("job_status", {"job_id": job_id}))
                if out["job"]["status"] == "succeeded":
                    break
                await asyncio.sleep(0.2)
            out["missing_job"] = await client.call_tool("job_status", {"job_id": "nope"})
        return out

    out = asyncio.run(session())
    assert out["tools"] == ["embed_text", "embed_texts", "job_status", "list_models",
                            "semantic_cache_feedback", "semantic_cache_lookup",
                            "semantic_cache_store"]
    np.testing.assert_allclose(out["one"]["embedding"], expected(f"{salt} mcp one"),
                               rtol=1e-5, atol=1e-6)
    assert [d["index"] for d in out["many"]["data"]] == [0, 1]
    np.testing.assert_allclose(out["many"]["data"][1]["embedding"], expected(f"{salt} mcp b"),
                               rtol=1e-5, atol=1e-6)
    assert out["hit"]["hit"] is True
    assert out["hit"]["matches"][0]["payload"] == {"answer": "use the reset link"}
    assert out["hit"]["matches"][0]["id"] == out["stored"]["id"]
    assert (out["feedback"]["recorded"], out["feedback"]["entry_id"]) == (True,
                                                                          out["stored"]["id"])
    assert out["unknown_hit"].is_error
    assert "no served hit" in out["unknown_hit"].content[0].text
    assert out["empty"].is_error and "non-empty" in out["empty"].content[0].text
    assert out["job"]["status"] == "succeeded" and out["job"]["progress"]["done"] == 5
    assert out["missing_job"].is_error
