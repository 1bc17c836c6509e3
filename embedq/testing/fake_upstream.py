"""A local OpenAI-compatible embeddings server with latency, a concurrency cap and faults.

    python -m embedq.testing.fake_upstream --port 9100 --latency-ms 200 --max-concurrency 5

Each call sleeps `latency_ms` while holding one of `max_concurrency` slots (so excess calls
queue, as a rate-limited paid API makes them). Vectors are JSON floats, or base64 of
little-endian float32 bytes when a call asks `encoding_format: "base64"`, as the OpenAI
API answers. Faults are scripted with POST /faults {"statuses": [429, 500, ...],
"hang_s": 0, "float_only": false}: each status answers one upcoming call; with `hang_s`
set, one upcoming call hangs that long; with `float_only`, calls asking for base64 are
refused with a 400 naming encoding_format (as an upstream that only speaks floats),
until /reset. GET /stats returns calls, texts, the
texts answered per text (failed and abandoned calls are counted apart) and `connections`:
the distinct client (host, port) pairs embeddings calls came from, i.e. TCP connections
(a client that keeps its connections alive reuses them); POST /reset clears them.
Vectors are the hashing encoder's.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
from typing import Any

import numpy as np
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from embedq.encoders.hashing import HashingEncoder


def create_app(latency_ms: float = 200.0, max_concurrency: int = 5) -> Starlette:
    upstream = _FakeUpstream(latency_ms, max_concurrency)
    return Starlette(routes=[
        Route("/v1/embeddings", upstream.embeddings, methods=["POST"]),
        Route("/faults", upstream.set_faults, methods=["POST"]),
        Route("/stats", upstream.stats, methods=["GET"]),
        Route("/reset", upstream.reset, methods=["POST"]),
    ])


class _FakeUpstream:
    """The server's routes and what they share: the slots, the counts, the scripted faults."""

    def __init__(self, latency_ms: float, max_concurrency: int) -> None:
        self.latency_ms = latency_ms
        self.encoder = HashingEncoder()
        self.slots = asyncio.Semaphore(max_concurrency)
        self.state: dict[str, Any] = {"calls": 0, "failed_calls": 0, "texts": 0,
                                      "inputs": collections.Counter(), "peers": set()}
        self.faults: dict[str, Any] = {"statuses": collections.deque(), "hang_s": 0.0,
                                       "float_only": False}

    async def embeddings(self, request: Request) -> JSONResponse:
        state, faults = self.state, self.faults
        if request.client is not None:
            state["peers"].add((request.client.host, request.client.port))
        body = await request.json()
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
        async with self.slots:
            state["calls"] += 1
            if faults["hang_s"]:
                hang, faults["hang_s"] = faults["hang_s"], 0.0
                await asyncio.sleep(hang)
            await asyncio.sleep(self.latency_ms / 1000)
            if faults["statuses"]:
                status = int(faults["statuses"].popleft())
                state["failed_calls"] += 1
                return JSONResponse({"error": {"message": f"injected {status}"}}, status)
            as_base64 = body.get("encoding_format") == "base64"
            if as_base64 and faults["float_only"]:
                state["failed_calls"] += 1
                return JSONResponse({"error": {"message": "encoding_format 'base64' is not "
                                                          "supported: use 'float'"}}, 400)
            if await request.is_disconnected():
                state["failed_calls"] += 1  # the client gave up (timed out) on this call
                return JSONResponse({"error": {"message": "client went away"}}, 499)
            state["texts"] += len(texts)
            state["inputs"].update(texts)
        vectors = self.encoder.encode(texts)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        # Floats as JSON cost this server 3.2 ms a 16-text call, base64 0.2 ms.
        data = [{"object": "embedding", "index": i,
                 "embedding": base64.b64encode(v.astype("<f4").tobytes()).decode("ascii")
                 if as_base64 else v.tolist()} for i, v in enumerate(vectors)]
        tokens = sum(len(t.split()) + 2 for t in texts)
        return JSONResponse({"object": "list", "data": data, "model": body.get("model", "fake"),
                             "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    async def set_faults(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.faults["statuses"].extend(int(s) for s in body.get("statuses", []))
        self.faults["hang_s"] = float(body.get("hang_s", 0))
        self.faults["float_only"] = bool(body.get("float_only", False))
        return JSONResponse({"ok": True})

    async def stats(self, _: Request) -> JSONResponse:
        state = self.state
        repeated = sum(1 for n in state["inputs"].values() if n > 1)
        return JSONResponse({"calls": state["calls"], "failed_calls": state["failed_calls"],
                             "texts": state["texts"],
                             "distinct_texts": len(state["inputs"]),
                             "texts_sent_more_than_once": repeated,
                             "connections": len(state["peers"])})

    async def reset(self, _: Request) -> JSONResponse:
        self.state.update(calls=0, failed_calls=0, texts=0, inputs=collections.Counter(),
                          peers=set())
        self.faults["statuses"].clear()
        self.faults["hang_s"] = 0.0
        self.faults["float_only"] = False
        return JSONResponse({"ok": True})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9100)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--max-concurrency", type=int, default=5)
    args = parser.parse_args()
    uvicorn.run(create_app(args.latency_ms, args.max_concurrency), host=args.host,
                port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
