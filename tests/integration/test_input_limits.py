"""One table of input limits, on every way in: each HTTP route, each MCP tool and
`embedq bulk` is sent an input one past each limit that applies to it, and answers 413
(a tool error, exit 2) naming the setting; at the limit it is accepted. The walk covers
every row of `embedq.limits.LIMITS`: a new limit must be walked here."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from embedq.limits import LIMITS
from tests.integration.test_api_support import ApiServer
from tests.integration.test_tenants import cli, mcp_calls, mcp_server

pytestmark = pytest.mark.integration

INPUTS, CHARS, BODY, FILE, JOB, TOKENS, LINE = 3, 40, 4096, 8192, 5, 20, 200
LIMIT_ENV = {"EMBEDQ_MAX_INPUTS": INPUTS, "EMBEDQ_MAX_INPUT_CHARS": CHARS,
             "EMBEDQ_MAX_BODY_BYTES": BODY, "EMBEDQ_MAX_FILE_BYTES": FILE,
             "EMBEDQ_MAX_JOB_INPUTS": JOB, "EMBEDQ_MAX_TOKENIZE_TOKENS": TOKENS,
             "EMBEDQ_MAX_LINE_BYTES": LINE}


@dataclass
class Way:
    """One way in: `send(at_limit)` returns (was it refused as too large, its message)."""

    name: str
    setting: str
    send: Callable[[bool], tuple[bool, str]]


@dataclass
class Servers:
    api: ApiServer
    mcp_port: int
    env: dict[str, str]
    tmp: Path


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    tmp = tmp_path_factory.mktemp("limits")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDQ_")}
    env.update({"EMBEDQ_ENCODER": "faulty", "EMBEDQ_DATA_DIR": str(tmp / "data"),
                "EMBEDQ_SEMANTIC_INDEX": "exact", "HF_HUB_OFFLINE": "1",
                "PYTHONUNBUFFERED": "1", **{k: str(v) for k, v in LIMIT_ENV.items()}})
    with ApiServer(env, tmp / "serve.log") as api, mcp_server(env, tmp / "mcp.log") as port:
        yield Servers(api, port, env, tmp)


def words(n: int) -> str:
    """A text of `n` words: the test encoders count n + 2 tokens."""
    return " ".join(["w"] * n)


def http(s: Servers, method: str, path: str, **kw: Any) -> tuple[bool, str]:
    got = httpx.request(method, s.api.url + path, timeout=60, **kw)
    error = got.json().get("error") if got.status_code >= 400 else None
    text = error if isinstance(error, str) else (error or {}).get("message", got.text)
    assert got.status_code < 500, got.text
    return got.status_code == 413, str(text)


def batch_file(lines: list[list[str]]) -> bytes:
    return "".join(json.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/embeddings",
                               "body": {"input": texts}}) + "\n"
                   for i, texts in enumerate(lines)).encode()


def upload(s: Servers, content: bytes) -> tuple[bool, str]:
    return http(s, "POST", "/v1/files", data={"purpose": "batch"},
                files={"file": ("r.jsonl", content)})


def tool(s: Servers, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    [(error, text)] = asyncio.run(mcp_calls(s.mcp_port, None, [(name, arguments)]))
    return error, text


def bulk(s: Servers, lines: list[str], name: str) -> tuple[bool, str]:
    path = s.tmp / name
    path.write_text("".join(line + "\n" for line in lines))
    done = cli(s.env, "bulk", str(path), "--now")
    return done.returncode == 2, done.stderr


def ways(s: Servers) -> list[Way]:
    ok, over = "x" * CHARS, "x" * (CHARS + 1)
    inputs = {True: ["a"] * INPUTS, False: ["a"] * (INPUTS + 1)}
    chars = {True: [ok], False: [ok, over]}
    body = {True: b'{"input": "a"}', False: b'{"input": "' + b"a" * BODY + b'"}'}
    tokens = {True: [words(8), words(8)], False: [words(8), words(9)]}  # 20 / 21
    job = {True: ["a"] * JOB, False: ["a"] * (JOB + 1)}
    line_ok, line_over = "y" * min(LINE, CHARS), "y" * (LINE + 1)
    out: list[Way] = []
    for path, field in (("/v1/embeddings", "input"), ("/embed", "inputs"), ("/", "inputs"),
                        ("/tokenize", "inputs")):
        out += [
            Way(f"{path} inputs", "EMBEDQ_MAX_INPUTS", lambda at, p=path, f=field: http(
                s, "POST", p, json={f: inputs[at]})),
            Way(f"{path} chars", "EMBEDQ_MAX_INPUT_CHARS", lambda at, p=path, f=field: http(
                s, "POST", p, json={f: chars[at]})),
            Way(f"{path} body", "EMBEDQ_MAX_BODY_BYTES", lambda at, p=path: http(
                s, "POST", p, content=body[at].replace(b"input", b"inputs" if p != "/v1/"
                                                       "embeddings" else b"input"),
                headers={"Content-Type": "application/json"})),
        ]
    out += [
        Way("/tokenize tokens", "EMBEDQ_MAX_TOKENIZE_TOKENS", lambda at: http(
            s, "POST", "/tokenize", json={"inputs": tokens[at]})),
        Way("/v1/jobs inputs", "EMBEDQ_MAX_JOB_INPUTS", lambda at: http(
            s, "POST", "/v1/jobs", json={"input": job[at]})),
        Way("/v1/jobs chars", "EMBEDQ_MAX_INPUT_CHARS", lambda at: http(
            s, "POST", "/v1/jobs", json={"input": [{"id": "a", "text": t} for t in chars[at]]})),
        Way("/v1/jobs body", "EMBEDQ_MAX_BODY_BYTES", lambda at: http(
            s, "POST", "/v1/jobs", content=body[at], headers={"Content-Type": "application/json"})),
        Way("/v1/files bytes", "EMBEDQ_MAX_FILE_BYTES", lambda at: upload(
            s, batch_file([["a"]]).ljust(FILE if at else FILE + 1, b"\n"))),
        Way("/v1/files line inputs", "EMBEDQ_MAX_INPUTS", lambda at: upload(
            s, batch_file([inputs[at]]))),
        Way("/v1/files chars", "EMBEDQ_MAX_INPUT_CHARS", lambda at: upload(
            s, batch_file([chars[at]]))),
        Way("/v1/files job inputs", "EMBEDQ_MAX_JOB_INPUTS", lambda at: upload(
            s, batch_file([["a"], ["b"] * 2, ["c"] * (2 if at else 3)]))),
        Way("/v1/files line bytes", "EMBEDQ_MAX_BODY_BYTES", lambda at: upload(
            s, batch_file([["z" * CHARS] * INPUTS]) if at else
            b'{"custom_id": "' + b"c" * BODY + b'"}\n')),
        Way("PUT semantic-cache query", "EMBEDQ_MAX_INPUT_CHARS", lambda at: http(
            s, "PUT", "/v1/semantic-cache/limits", json={"query": chars[at][-1], "payload": 1})),
        Way("semantic-cache lookup query", "EMBEDQ_MAX_INPUT_CHARS", lambda at: http(
            s, "POST", "/v1/semantic-cache/limits/lookup", json={"query": chars[at][-1]})),
        Way("MCP embed_text", "EMBEDQ_MAX_INPUT_CHARS", lambda at: tool(
            s, "embed_text", {"text": chars[at][-1]})),
        Way("MCP embed_texts inputs", "EMBEDQ_MAX_INPUTS", lambda at: tool(
            s, "embed_texts", {"texts": inputs[at]})),
        Way("MCP embed_texts chars", "EMBEDQ_MAX_INPUT_CHARS", lambda at: tool(
            s, "embed_texts", {"texts": chars[at]})),
        Way("MCP semantic_cache_store", "EMBEDQ_MAX_INPUT_CHARS", lambda at: tool(
            s, "semantic_cache_store", {"namespace": "limits", "query": chars[at][-1],
                                        "payload": 1})),
        Way("MCP semantic_cache_lookup", "EMBEDQ_MAX_INPUT_CHARS", lambda at: tool(
            s, "semantic_cache_lookup", {"namespace": "limits", "query": chars[at][-1]})),
        Way("MCP over HTTP body", "EMBEDQ_MAX_BODY_BYTES", lambda at: mcp_body(s, at)),
        Way("embedq bulk line bytes", "EMBEDQ_MAX_LINE_BYTES", lambda at: bulk(
            s, [line_ok if at else line_over], f"line-{at}.txt")),
        Way("embedq bulk chars", "EMBEDQ_MAX_INPUT_CHARS", lambda at: bulk(
            s, chars[at], f"chars-{at}.txt")),
        Way("embedq bulk job inputs", "EMBEDQ_MAX_JOB_INPUTS", lambda at: bulk(
            s, [f"t{i}" for i in range(len(job[at]))], f"job-{at}.txt")),
    ]
    return out


def mcp_body(s: Servers, at: bool) -> tuple[bool, str]:
    size = 1000 if at else BODY + 1
    got = httpx.post(f"http://127.0.0.1:{s.mcp_port}/mcp", content=b" " * size,
                     headers={"Content-Type": "application/json"}, timeout=30)
    return got.status_code == 413, got.text


def test_every_way_in_refuses_one_past_each_limit_naming_it(servers: Servers) -> None:
    walked = ways(servers)
    assert {w.setting for w in walked} == {limit.setting for limit in LIMITS}
    wrong = []
    for way in walked:
        refused, message = way.send(False)
        if not refused or way.setting not in message:
            wrong.append(f"{way.name}, one past: refused={refused}: {message[:300]}")
        refused, message = way.send(True)
        if refused:
            wrong.append(f"{way.name}, at the limit: refused: {message[:300]}")
    assert not wrong, "\n".join(wrong)
