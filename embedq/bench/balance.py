"""`embedq bench balance`: semantic-cache namespaces routed to API replicas by HAProxy.

Three `embedq serve` replicas on loopback behind haproxy running deploy/haproxy.cfg
(embedq.bench.haproxy), with an `embedq worker` when online misses are queued and none is
live; a fresh set of replicas and a fresh haproxy for each mode, so that what a replica
answered in one mode is all it touched:

1. --namespaces (200) namespaces of --entries entries each are stored from this process
   before any replica starts (no replica touches a namespace to write it).
2. For each mode (bounded, bounded-all, hash, roundrobin: haproxy.MODES) the same
   --requests lookups,
   each of a namespace drawn Zipf(--zipf, 1.1) over the namespaces (rank 1 the hottest)
   and one of its stored queries, sent through the balancer from --callers connections.
3. Per mode, from HAProxy's own counts (stats socket), the replica each answer names
   (X-Embedq-Replica, set by the shipped file: HAProxy's request log drops lines under
   load) and each replica's
   /metrics (embedq_semantic_replica_*: what it holds, namespaces loaded on first use):
   load peak      the most requests one replica had in flight at once over the mean in
                  flight (callers / replicas): what the shipped file and
                  hash-balance-factor 125 cap at 1.25 (exactly, when callers is a multiple
                  of 12: whole requests per replica)
   queued         the most requests that waited in HAProxy for one replica at once (the
                  shipped file queues a cold namespace's request at a full replica)
   request share  the most requests one replica was sent over the mean
   memory         the semantic bytes a replica holds over those of a replica that holds
                  every namespace (a fresh one asked about each, after the modes; with
                  --no-reference, bytes)
   loads/1000     namespaces loaded per 1000 lookups, all replicas (first use, or again
                  after an eviction under --memory-mb)
   copies         how many namespaces 1, 2 and 3 replicas answered
   hot spread     the hottest namespace's requests on each replica
4. The namespaces are dropped.

Needs Redis and Postgres (EMBEDQ_BROKER_URL, EMBEDQ_REDIS_URL, EMBEDQ_DATABASE_URL) and an
haproxy binary (Debian's package: `make haproxy`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import secrets
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from embedq.bench import haproxy
from embedq.bench.cluster import preflight, wait_for_worker, wait_ready
from embedq.bench.jobs import live_workers_serving
from embedq.config import Settings
from embedq.deployment import Deployment
from embedq.errors import ConfigError, Unavailable
from embedq.semantic import SemanticCache
from embedq.testing import loadgen, processes

PREFIX = "bench-balance-"
SEED = 28
REFERENCE_CALLERS = 4
Procs = dict[str, tuple[subprocess.Popen[bytes], Path]]
_REPLICA = re.compile(r"^embedq_semantic_replica_(namespaces|bytes|loads|evictions)(?:_total)?"
                      r"\s+(\S+)$", re.M)


def namespaces(n: int) -> list[str]:
    """The bench's namespaces, hottest first."""
    return [f"{PREFIX}{rank:03d}" for rank in range(1, n + 1)]


def zipf_draws(n: int, requests: int, exponent: float, seed: int = SEED) -> list[int]:
    """`requests` ranks in [0, n) drawn with P(rank k) proportional to (k + 1)^-exponent."""
    weights = np.arange(1, n + 1, dtype=np.float64) ** -exponent
    rng = np.random.default_rng(seed)
    return [int(k) for k in rng.choice(n, size=requests, p=weights / weights.sum())]


def _query(namespace: str, entry: int) -> str:
    return f"question {entry} of {namespace}: how do I reset the account's password"


@contextlib.contextmanager
def _cache(settings: Settings) -> Iterator[SemanticCache]:
    """A semantic cache in this process (its misses encoded as the replicas' are)."""
    deployment = Deployment.from_settings(settings)
    cache = SemanticCache(deployment.service, start=False)
    try:
        yield cache
    finally:
        cache.close(save=False)
        deployment.close()


def _fill(cache: SemanticCache, names: list[str], entries: int) -> None:
    """Each namespace emptied when it holds entries (a run stopped midway leaves them),
    then given `entries` entries, one put at a time (threads were no faster)."""
    for name in names:
        if cache.store.owner(name) is not None:
            cache.drop(name)
        for entry in range(entries):
            cache.put(name, _query(name, entry), {"answer": entry})


@contextlib.contextmanager
def _worker(settings: Settings, env: dict[str, str], tmp: Path) -> Iterator[list[str]]:
    """An `embedq worker` when the replicas queue their misses and none serves the model."""
    procs: Procs = {}
    if settings.queue.online_encode == "queue" and not live_workers_serving(settings)[0]:
        log = tmp / "worker.log"
        procs["worker"] = (processes.spawn_worker(env, log), log)
    try:
        if procs:
            wait_for_worker(settings, procs)
        yield list(procs)
    finally:
        for proc, _ in procs.values():
            processes.stop(proc)


@contextlib.contextmanager
def _replicas(env: dict[str, str], tmp: Path, mode: str, count: int = haproxy.REPLICAS
              ) -> Iterator[list[str]]:
    """`count` fresh `embedq serve` processes, yielded as host:port once ready."""
    ports = processes.free_ports(count)
    procs: Procs = {}
    for n, port in enumerate(ports, 1):
        log = tmp / f"serve-{mode}-{n}.log"
        procs[f"serve {n}"] = (processes.spawn_api(env, port, log), log)
    try:
        for port in ports:
            wait_ready(f"http://127.0.0.1:{port}", procs)
        yield [f"127.0.0.1:{port}" for port in ports]
    finally:
        for proc, _ in procs.values():
            processes.stop(proc)


def memory(address: str, headers: dict[str, str]) -> dict[str, int]:
    """What the replica at `address` holds (its /metrics: embedq_semantic_replica_*)."""
    resp = httpx.get(f"http://{address}/metrics", headers=headers, timeout=30)
    resp.raise_for_status()
    found = {m.group(1): int(float(m.group(2))) for m in _REPLICA.finditer(resp.text)}
    if "bytes" not in found:
        raise Unavailable(f"{address}/metrics has no embedq_semantic_replica_bytes: the "
                          "replicas run an embedq that loads every namespace at start")
    return found


def _reference(env: dict[str, str], tmp: Path, names: list[str], entries: int
               ) -> dict[str, int]:
    """A replica that holds every namespace: one lookup each, on a fresh one with the
    default budget."""
    headers = {"Authorization": f"Bearer {env['EMBEDQ_API_KEYS']}"}
    env = {k: v for k, v in env.items() if k != "EMBEDQ_SEMANTIC_MEMORY_MB"}
    with _replicas(env, tmp, "reference", 1) as (address,):
        asyncio.run(_drive(f"http://{address}",
                           [f"/v1/semantic-cache/{name}/lookup" for name in names],
                           [{"query": _query(name, entries - 1)} for name in names],
                           REFERENCE_CALLERS, headers))
        return memory(address, headers)


async def _drive(url: str, paths: list[str], bodies: list[Any], callers: int,
                 headers: dict[str, str]) -> list[str]:
    """Each body POSTed once to its path, from `callers` keep-alive connections; the
    X-Embedq-Replica each answer names, in request order ("" where none)."""
    pending = iter(range(len(bodies)))
    answered_by = [""] * len(bodies)

    async def caller() -> None:
        conn = loadgen.Connection(url)
        try:
            for i in pending:
                status, payload = await conn.post_json(bodies[i], headers, paths[i])
                if status >= 400:
                    raise Unavailable(f"{paths[i]} answered {status}: {payload[:300]!r}")
                answered_by[i] = conn.headers.get("x-embedq-replica", "")
        finally:
            conn.close()

    await asyncio.gather(*[caller() for _ in range(callers)])
    return answered_by


def _phase(mode: str, config: str, env: dict[str, str], tmp: Path, names: list[str],
           draws: list[int], entries: int, callers: int) -> dict[str, Any]:
    rng = np.random.default_rng(SEED + 1)
    paths = [f"/v1/semantic-cache/{names[k]}/lookup" for k in draws]
    bodies = [{"query": _query(names[k], int(rng.integers(entries)))} for k in draws]
    headers = {"Authorization": f"Bearer {env['EMBEDQ_API_KEYS']}"}
    with _replicas(env, tmp, mode) as addresses, \
            haproxy.Balancer(haproxy.variant(config, mode), addresses, tmp, mode) as lb:
        started = time.perf_counter()
        answered_by = asyncio.run(_drive(lb.url, paths, bodies, callers, headers))
        wall = time.perf_counter() - started
        servers = lb.replicas()
        held_now = [memory(address, headers) for address in addresses]
    held: dict[str, set[str]] = {s.name: set() for s in servers}
    hot: Counter[str] = Counter()
    unnamed = answered_by.count("")
    if unnamed or set(answered_by) - set(held):
        raise ConfigError(f"{unnamed} answers named no replica of {sorted(held)} in "
                          "X-Embedq-Replica: the haproxy file must keep deploy/haproxy.cfg's "
                          "`http-response set-header X-Embedq-Replica %s`")
    for server, k in zip(answered_by, draws, strict=True):
        held[server].add(names[k])
        if k == 0:
            hot[server] += 1
    mean_requests = len(draws) / len(servers)
    replicas = [{"name": s.name, "requests": s.requests, "peak_in_flight": s.peak_in_flight,
                 "namespaces": len(held[s.name]),
                 "held_share": round(len(held[s.name]) / len(names), 3),
                 "memory": {k: m[k] for k in ("namespaces", "bytes", "loads", "evictions")}}
                for s, m in zip(servers, held_now, strict=True)]
    hot_total = sum(hot.values())
    copies = Counter(sum(name in held[s.name] for s in servers) for name in names)
    return {
        "mode": mode, "requests": len(draws), "wall_s": round(wall, 2),
        "load_peak": round(max(s.peak_in_flight for s in servers)
                           / (callers / len(servers)), 3),
        "queued_peak": max(s.peak_queued for s in servers),
        "request_share": round(max(s.requests for s in servers) / mean_requests, 3),
        "held_share_max": round(max(len(held[s.name]) for s in servers) / len(names), 3),
        "replicas": replicas,
        "copies": {str(n): copies[n] for n in range(1, len(servers) + 1)},
        "loads_per_1000": round(1000 * sum(m["loads"] for m in held_now) / len(draws), 1),
        "hot": {"namespace": names[0], "requests": hot_total,
                "per_replica": {s.name: round(hot[s.name] / max(1, hot_total), 3)
                                for s in servers},
                "replicas": sum(1 for s in servers if hot[s.name])},
    }


def _print(row: dict[str, Any]) -> None:
    memory = " ".join(f"{r['memory_share']:.2f}" if r["memory_share"] is not None
                      else f"{r['memory']['bytes'] // 1024}K" for r in row["replicas"])
    hot = " ".join(f"{share:.2f}" for share in row["hot"]["per_replica"].values())
    copies = "/".join(str(n) for n in row["copies"].values())
    print(f"  {row['mode']:<11}  {row['load_peak']:>9.2f}  {row['queued_peak']:>6}  "
          f"{row['request_share']:>13.2f}  {memory:>18}  {row['loads_per_1000']:>10.1f}  "
          f"{copies:>11}  {hot:>16}  {row['wall_s']:>6.1f}")


def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings.from_env()
    preflight(settings)
    haproxy.binary()
    if args.namespaces < 2 or args.entries < 1 or args.requests < 1 or args.callers < 1:
        raise ConfigError("--namespaces takes 2 or more, --entries, --requests and --callers "
                          "1 or more")
    modes = list(dict.fromkeys(args.modes))
    path = Path(args.config) if args.config else haproxy.default_config()
    if not path.is_file():
        raise ConfigError(f"no haproxy file at {path}: pass --config deploy/haproxy.cfg "
                          "of an embedq checkout")
    config = path.read_text()
    names = namespaces(args.namespaces)
    draws = zipf_draws(len(names), args.requests, args.zipf)
    env = {**os.environ, "EMBEDQ_API_KEYS": secrets.token_urlsafe(24), "PYTHONUNBUFFERED": "1"}
    if args.memory_mb is not None:
        env["EMBEDQ_SEMANTIC_MEMORY_MB"] = str(args.memory_mb)
    print(f"bench balance: {len(names)} namespaces x {args.entries} entries, {args.requests} "
          f"lookups drawn Zipf({args.zipf}) from {args.callers} connections, "
          f"{haproxy.REPLICAS} replicas behind haproxy ({path.name})")
    report: dict[str, Any] = {"namespaces": len(names), "entries": args.entries,
                              "requests": args.requests, "zipf": args.zipf,
                              "callers": args.callers,
                              "hot_requests": draws.count(0),
                              "hot_share": round(draws.count(0) / len(draws), 3), "modes": []}
    with tempfile.TemporaryDirectory(prefix="embedq-bench-balance-") as tmpdir, \
            _worker(settings, env, Path(tmpdir)) as started, _cache(settings) as cache:
        report["started"] = started
        try:
            _fill(cache, names, args.entries)
            for mode in modes:
                report["modes"].append(_phase(mode, config, env, Path(tmpdir), names, draws,
                                              args.entries, args.callers))
                print(f"  {mode}: {report['modes'][-1]['wall_s']} s")
            if not args.no_reference:
                report["reference"] = _reference(env, Path(tmpdir), names, args.entries)
        finally:
            for name in names:
                cache.drop(name)
    every = report["reference"]["bytes"] if "reference" in report else None
    print(f"  {'mode':<11}  {'load peak':>9}  {'queued':>6}  {'request share':>13}  "
          f"{'memory per replica':>18}  {'loads/1000':>10}  {'copies 1/2/3':>11}  "
          f"{'hot per replica':>16}  {'wall s':>6}")
    for row in report["modes"]:
        for replica in row["replicas"]:
            replica["memory_share"] = (round(replica["memory"]["bytes"] / every, 3)
                                       if every else None)
        row["memory_share_max"] = max(r["memory_share"] for r in row["replicas"]) \
            if every else None
        _print(row)
    memory = (f"semantic bytes a replica holds / a replica holding all {len(names)} namespaces "
              f"({every} bytes)" if every else "KiB of semantic indexes a replica holds")
    print(f"load peak: the busiest replica's most requests in flight / (callers / replicas); "
          f"queued: the most waiting in HAProxy for one replica; "
          f"memory: {memory}; loads: namespaces loaded per 1000 lookups; hot: "
          f"{names[0]} ({report['hot_share']:.0%} of lookups), its requests per replica")
    return report
