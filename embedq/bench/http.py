"""`embedq bench http`: the HTTP API under 50 concurrent one-text clients.

Runs in this order, all in one run so the figures compare like with like:
  1. bare encode: the configured encoder, loaded here, embeds one text at a time
     (`encode([text])`) for a sample of the pool (its median is the latency baseline),
     then the miss phase's texts in batches of BARE_BATCH (texts/s: the throughput
     baseline, what the model does when nothing stands in front of it);
  2. starts `embedq serve` on a free loopback port with this environment: on a cluster
     with a temporary API key, and an `embedq worker` too when the API queues its online
     misses and no live worker serves the model (`embedq.bench.cluster`, which also names
     a missing Redis or Postgres at once); in embedded mode (no servers configured) in a
     temporary data dir;
  3. misses: each text of the pool (made unique to this run) requested once, one text
     per request, by CLIENTS concurrent clients;
     With `--peer URL` the same count of other texts goes to that server through the
     same client, the two in SIDE_BY_SIDE_SLICES slices that alternate;
  4. hits: the same number of requests again over the same pool, now cached.
Prints requests/s, p50 and p99 latency per phase, the ratio of the miss p50 to the
bare encode p50, and the ratio of misses/s (one text each) to bare batched texts/s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from embedq.bench.cluster import cluster
from embedq.bench.stats import percentile
from embedq.config import Settings
from embedq.corpus import load_texts
from embedq.errors import InvalidInput, Unavailable

CLIENTS = 50
BARE_SAMPLE = 50
BARE_BATCH = 32  # SentenceTransformer.encode's default batch size
SIDE_BY_SIDE_SLICES = 4


def run(args: argparse.Namespace) -> dict[str, Any]:
    peer_url: str | None = getattr(args, "peer", None)
    if peer_url and not peer_url.startswith("http://"):
        raise InvalidInput(f"--peer {peer_url!r}: give the server's http://HOST:PORT (its "
                           "OpenAI route at /v1/embeddings)", "peer")
    settings = Settings.from_env()
    run_id = uuid.uuid4().hex[:8]
    pool = [f"{t} [{run_id}-{i}]" for i, t in enumerate(dict.fromkeys(
        load_texts(args.n, args.file)))]
    # The bare model at its own best, whatever threads an encoding API is given.
    bare_ms, bare_rate = _bare_encode(settings.with_overrides(model_threads=0), pool)
    bare_rate = round(bare_rate, 1)  # as reported: the ratio is of the two printed figures
    with tempfile.TemporaryDirectory(prefix="embedq-bench-http-") as tmp, \
            _target(settings, Path(tmp)) as (url, headers, started):
        asyncio.run(_phase(url, headers, pool[:CLIENTS], warm=True))
        if peer_url:
            misses, peer = _side_by_side(url, headers, pool[CLIENTS:], peer_url, pool)
        else:
            misses, peer = asyncio.run(_phase(url, headers, pool[CLIENTS:])), None
        hits_pool = pool[CLIENTS:]
        hits = asyncio.run(_phase(url, headers, random.sample(hits_pool, len(hits_pool))))
    report: dict[str, Any] = {
        "clients": CLIENTS,
        "requests": len(pool) - CLIENTS,
        "mode": "embedded" if settings.embedded else "cluster",
        "online_encode": settings.queue.online_encode,
        "started": started,
        "encoder": settings.model.encoder,
        "bare_encode_p50_ms": round(bare_ms, 2),
        "bare_batched_texts_per_s": round(bare_rate, 1),
        "miss": misses,
        "hit": hits,
        "miss_p50_over_bare_encode": round(misses["p50_ms"] / bare_ms, 2),
        "misses_over_bare_batched": round(misses["requests_per_s"] / bare_rate, 3),
    }
    if peer is not None:
        report["peer"] = {"url": peer_url, "slices": SIDE_BY_SIDE_SLICES, **peer}
        report["misses_over_peer"] = round(misses["requests_per_s"] / peer["requests_per_s"], 3)
    where = "in the API" if settings.queue.online_encode == "local" else "by workers"
    print(
        f"bench http: {CLIENTS} clients, {report['requests']} one-text requests per phase "
        f"({report['mode']}, encoder {settings.model.encoder}; started: {', '.join(started)}; "
        f"online misses encoded {where})\n"
        f"  misses: {misses['requests_per_s']:.0f} req/s, p50 {misses['p50_ms']:.1f} ms, "
        f"p99 {misses['p99_ms']:.1f} ms\n"
        f"  hits:   {hits['requests_per_s']:.0f} req/s, p50 {hits['p50_ms']:.1f} ms, "
        f"p99 {hits['p99_ms']:.1f} ms\n"
        f"  bare encode of one text: p50 {bare_ms:.2f} ms; "
        f"miss p50 / bare encode = {report['miss_p50_over_bare_encode']:.2f}\n"
        f"  bare batched encode (batches of {BARE_BATCH}, the miss phase's texts): "
        f"{bare_rate:.1f} texts/s; misses/s / bare batched = "
        f"{report['misses_over_bare_batched']:.3f}"
    )
    if peer is not None:
        print(f"  peer {peer_url} (the same client, the miss phase's count of other texts, "
              f"in {SIDE_BY_SIDE_SLICES} slices alternating with the misses'): "
              f"{peer['requests_per_s']:.0f} req/s, p50 {peer['p50_ms']:.1f} ms; "
              f"misses/s / peer = {report['misses_over_peer']:.3f}")
    return report


def _side_by_side(url: str, headers: dict[str, str], texts: list[str], peer_url: str,
                  pool: list[str]) -> tuple[dict[str, float], dict[str, float]]:
    """(misses, peer): the miss phase's load and the same count of other texts against
    the peer (warmed first), in SIDE_BY_SIDE_SLICES alternating slices, each side first
    in every other slice: a host whose speed drifts during the run (shared cores) moves
    both alike, where one phase after the other gave whichever ran in a slow minute the
    worse figure."""
    peer_texts = [f"peer {t}" for t in pool]
    base = peer_url.rstrip("/")
    try:
        asyncio.run(_phase(base, {}, peer_texts[:CLIENTS], warm=True))
    except OSError as exc:
        raise Unavailable(f"--peer {peer_url}: not reachable ({exc}): start it first") from exc
    ours: list[tuple[float, list[float]]] = []
    theirs: list[tuple[float, list[float]]] = []
    slices = SIDE_BY_SIDE_SLICES
    peer_texts = peer_texts[CLIENTS:]
    for n in range(slices):
        mine, other = texts[n::slices], peer_texts[n::slices]
        runs = [(url, headers, mine, ours), (base, {}, other, theirs)]
        for target, extra, part, into in (runs if n % 2 == 0 else runs[::-1]):
            into.append(asyncio.run(_timed(target, extra, part)))
    return _summary(ours), _summary(theirs)


def _summary(runs: list[tuple[float, list[float]]]) -> dict[str, float]:
    """Rate over the runs' summed time, latency percentiles over all their requests."""
    latencies = [ms for _, run in runs for ms in run]
    elapsed = sum(seconds for seconds, _ in runs)
    return {
        "requests_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(percentile(latencies, 50), 2),
        "p99_ms": round(percentile(latencies, 99), 2),
    }


def _bare_encode(settings: Settings, pool: list[str]) -> tuple[float, float]:
    """(one-text encode p50 ms, batched texts/s) of the configured encoder, loaded here."""
    from embedq.encoders import load_encoder

    encoder = load_encoder(settings)
    encoder.warm_up()
    sample = pool[:BARE_SAMPLE]
    for text in sample[:5]:
        encoder.encode([text])
    times = []
    for text in sample:
        started = time.perf_counter()
        encoder.encode([text])
        times.append((time.perf_counter() - started) * 1000)
    batched = pool[CLIENTS:]
    started = time.perf_counter()
    for i in range(0, len(batched), BARE_BATCH):
        encoder.encode(batched[i : i + BARE_BATCH])
    rate = len(batched) / max(time.perf_counter() - started, 1e-9)
    del encoder
    return percentile(times, 50), rate


@contextlib.contextmanager
def _target(settings: Settings, tmp: Path) -> Iterator[tuple[str, dict[str, str], list[str]]]:
    """(url, headers, names of the processes started) of the server under test."""
    if settings.embedded:
        with _server(settings, tmp) as url:
            headers = {"Authorization": f"Bearer {settings.api.keys[0]}"} \
                if settings.api.keys else {}
            yield url, headers, ["serve"]
        return
    with cluster(settings, tmp) as target:
        yield target.url, target.headers, sorted(target.started)


@contextlib.contextmanager
def _server(settings: Settings, tmp: Path) -> Any:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    env = dict(os.environ)
    if settings.embedded:
        env["EMBEDQ_DATA_DIR"] = str(tmp)
    log = open(tmp / "serve.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "embedq.cli", "serve", "--host", "127.0.0.1",
         "--port", str(port)],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("embedq serve did not start:\n"
                                 + (tmp / "serve.log").read_text()[-3000:])
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/readyz", timeout=5).status_code == 200:
                    break
            time.sleep(0.2)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


async def _phase(
    url: str, headers: dict[str, str], texts: list[str], warm: bool = False
) -> dict[str, float]:
    """`_timed`'s run summarized: requests/s and latency percentiles ({} when `warm`)."""
    run = await _timed(url, headers, texts)
    return {} if warm else _summary([run])


async def _timed(
    url: str, headers: dict[str, str], texts: list[str]
) -> tuple[float, list[float]]:
    """(seconds, each request's ms): CLIENTS concurrent clients, each taking the next
    text until none are left.

    Each client is one keep-alive HTTP/1.1 connection written by hand: a general-purpose
    async client spends more CPU per request than the server does, and would measure
    itself (httpx at 50 connections: ~200 requests/s here, against ~1,500 this way).
    """
    host, port = url.removeprefix("http://").rsplit(":", 1)
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    queue: asyncio.Queue[str] = asyncio.Queue()
    for text in texts:
        queue.put_nowait(text)
    latencies: list[float] = []

    async def client() -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            while True:
                try:
                    text = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                body = json.dumps({"input": [text]}).encode()
                started = time.perf_counter()
                writer.write(
                    (f"POST /v1/embeddings HTTP/1.1\r\nHost: {host}\r\n{extra}"
                     f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                     ).encode() + body
                )
                await writer.drain()
                status, answer = await _read_response(reader)
                latencies.append((time.perf_counter() - started) * 1000)
                if status != 200:
                    raise SystemExit(f"bench request failed: {status} {answer[:300]!r}")
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(CLIENTS)))
    return time.perf_counter() - started, latencies


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length = next(int(line.split(":", 1)[1]) for line in lines
                  if line.lower().startswith("content-length:"))
    return status, await reader.readexactly(length)
