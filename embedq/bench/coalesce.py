"""`embedq bench coalesce`: the hot-document scenario, replayed both ways in one run.

An upstream embeddings API that takes `latency_ms` a call and serves at most 5 calls at
once (embedq.testing.fake_upstream, on loopback). 50 concurrent callers send 500
requests drawn at random from 10 distinct texts:
  1. straight to the upstream (what an MCP server without embedq does);
  2. through embedq: the HTTP API, the queue and workers whose encoder is that upstream;
  3. the same with 3 API processes and 2 workers;
  4. a Zipf-distributed variant over the Debian corpus (hot documents), 1 API, 1 worker.
Reports upstream calls (from the upstream's own count), wall time, and the share of
upstream calls saved. Needs Redis and Postgres (EMBEDQ_BROKER_URL, EMBEDQ_REDIS_URL,
EMBEDQ_DATABASE_URL): the point is the cross-process path.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from embedq.config import Settings
from embedq.corpus import load_texts
from embedq.errors import ConfigError
from embedq.testing import loadgen, processes

CALLERS = 50
REQUESTS = 500
DISTINCT = 10


async def _fire(urls: list[str], texts: list[str], body: Any) -> float:
    return await loadgen.fire(urls, [body(t) for t in texts], CALLERS)


def _upstream_stats(port: int) -> dict[str, int]:
    data: dict[str, int] = httpx.get(f"http://127.0.0.1:{port}/stats").json()
    return data


@contextlib.contextmanager
def _embedq(env: dict[str, str], apis: int, workers: int, tmp: Path) -> Iterator[list[str]]:
    procs = []
    try:
        for w in range(workers):
            procs.append(processes.spawn_worker(env, tmp / f"worker{w}.log"))
        ports = processes.free_ports(apis)
        for n, port in enumerate(ports):
            procs.append(processes.spawn_api(env, port, tmp / f"api{n}.log"))
        for port in ports:
            processes.wait_http(f"http://127.0.0.1:{port}/readyz")
        time.sleep(0.5)  # every worker's consumer subscribed
        yield [f"http://127.0.0.1:{p}/v1/embeddings" for p in ports]
    finally:
        for proc in procs:
            processes.stop(proc)


def _body(text: str) -> dict[str, Any]:
    return {"model": "fake-embed", "input": [text]}


def upstream_env(port: int) -> dict[str, str]:
    """This process's environment (EMBEDQ_* last) with embedq's encoder pointed at the
    fake upstream on `port`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDQ_")}
    base.update({k: v for k, v in os.environ.items() if k.startswith("EMBEDQ_")})
    base.update({"EMBEDQ_ENCODER": "upstream",
                 "EMBEDQ_UPSTREAM_URL": f"http://127.0.0.1:{port}/v1",
                 "EMBEDQ_UPSTREAM_MODEL": "fake-embed",
                 "EMBEDQ_MODEL_REVISION": "fake-embed-v1"})
    return base


@dataclass(frozen=True)
class _Upstream:
    """The fake upstream on `port`, and what an embedq in front of it runs with."""

    port: int
    env: dict[str, str]
    tmp: Path

    def scenario(self, name: str, urls: list[str] | None, texts: list[str],
                 apis: int = 1, workers: int = 1) -> dict[str, Any]:
        """Fire `texts` at `urls` (None: at an embedq of `apis` APIs and `workers` workers
        started on fresh queues) and count what reached the upstream; prints the row."""
        httpx.post(f"http://127.0.0.1:{self.port}/reset")
        if urls is None:
            env = dict(self.env)
            tag = uuid.uuid4().hex[:6]
            env.update({"EMBEDQ_ONLINE_QUEUE": f"bench-{tag}",
                        "EMBEDQ_BULK_QUEUE": f"bench-bulk-{tag}"})
            with _embedq(env, apis, workers, self.tmp) as api_urls:
                wall = asyncio.run(_fire(api_urls, texts, _body))
        else:
            wall = asyncio.run(_fire(urls, texts, _body))
        stats = _upstream_stats(self.port)
        row = {"requests": len(texts), "distinct": len(set(texts)),
               "upstream_calls": stats["calls"], "upstream_texts": stats["texts"],
               "wall_s": round(wall, 3),
               "calls_saved_share": round(1 - stats["calls"] / len(texts), 4)}
        print(f"  {name:<34} requests={row['requests']:>5} distinct={row['distinct']:>5}"
              f" upstream_calls={row['upstream_calls']:>5}"
              f" texts_sent={row['upstream_texts']:>5} wall={wall:7.2f} s"
              f" saved={row['calls_saved_share']:.1%}")
        return row


def _scenarios(upstream: _Upstream, args: argparse.Namespace, rng: random.Random,
               latency_ms: float) -> dict[str, Any]:
    """The four scenarios of the module docstring, in order, and the wall time against
    one upstream call."""
    out: dict[str, Any] = {}
    direct = [f"http://127.0.0.1:{upstream.port}/v1/embeddings"]
    print(f"bench coalesce: {CALLERS} callers, upstream {latency_ms:.0f} ms/call, "
          "at most 5 calls at once")
    run_id = uuid.uuid4().hex[:8]
    hot = [f"hot document {i} [{run_id}]" for i in range(DISTINCT)]
    draws = [rng.choice(hot) for _ in range(REQUESTS)]
    out["without_embedq"] = upstream.scenario("without embedq (direct)", direct, draws)
    out["embedq_1api_1worker"] = upstream.scenario("embedq: 1 API, 1 worker", None, draws)
    hot2 = [f"{t} second" for t in hot]
    draws2 = [rng.choice(hot2) for _ in range(REQUESTS)]
    out["embedq_3api_2workers"] = upstream.scenario("embedq: 3 APIs, 2 workers", None,
                                                    draws2, apis=3, workers=2)
    corpus = [f"{t} [{run_id}]" for t in dict.fromkeys(load_texts(args.n, args.file))]
    ranks = np.random.default_rng(7).zipf(1.2, size=4 * REQUESTS)
    zipf = [corpus[(int(r) - 1) % len(corpus)] for r in ranks]
    out["zipf_debian"] = upstream.scenario("embedq: Zipf(1.2) over Debian", None, zipf)
    one_call_ms = latency_ms
    out["wall_vs_one_upstream_call"] = round(
        out["embedq_1api_1worker"]["wall_s"] * 1000 / one_call_ms, 2)
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings.from_env()
    if settings.embedded:
        raise ConfigError(
            "bench coalesce measures the cross-process path: set EMBEDQ_BROKER_URL, "
            "EMBEDQ_REDIS_URL and EMBEDQ_DATABASE_URL (Redis and Postgres)"
        )
    latency_ms = 200.0
    report: dict[str, Any] = {"upstream_latency_ms": latency_ms, "upstream_max_concurrency": 5}
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="embedq-bench-coalesce-") as tmpdir:
        tmp = Path(tmpdir)
        port = processes.free_port()
        upstream = processes.spawn_fake_upstream(port, latency_ms, 5, tmp / "upstream.log")
        try:
            processes.wait_http(f"http://127.0.0.1:{port}/stats")
            report.update(_scenarios(_Upstream(port, upstream_env(port), tmp), args, rng,
                                     latency_ms))
        finally:
            processes.stop(upstream)
    return report
