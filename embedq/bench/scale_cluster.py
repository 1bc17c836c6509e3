"""`embedq bench scale --cluster`: what coordination costs on a Redis Cluster against one
Redis.

The bench starts one redis-server and a cluster of three (`embedq.testing.redis_cluster`,
no replica) on loopback, the same binary and settings, and times the store's calls on
each, alternating, over fresh fingerprints each round:

- claim: `claim` of n fingerprints with one caller's interest each (a request's misses);
- batch: what a worker does for a batch of n: `lease`, `drop_unwanted`, `record_batch`
  (vectors, claims freed, attempts forgotten, "done", counters).

Reported per n (64 and 1,000 by default): the median ms of each call on each, their ratio
(cluster over one Redis; target <= 3), and the CROSSSLOT errors the cluster's masters and
the client counted (target 0). Needs redis-server (Debian's package) on this machine.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from redis.cluster import RedisCluster

from embedq.coordination.redis_store import RedisHotStore
from embedq.coordination.store import BatchRecord, Interest
from embedq.errors import ConfigError, EmbedqError
from embedq.testing.processes import free_port
from embedq.testing.redis_cluster import LocalRedisCluster

VECTOR = bytes(384 * 4)  # a 384-d float32 vector's bytes


def _timed(call: Callable[[], object]) -> float:
    began = time.perf_counter()
    call()
    return (time.perf_counter() - began) * 1000


def _claim(store: RedisHotStore, n: int) -> float:
    fps = [uuid.uuid4().hex * 2 for _ in range(n)]
    owner = uuid.uuid4().hex
    return _timed(lambda: store.claim(fps, owner, 60_000,
                                      Interest({fp: [owner] for fp in fps}, 60_000)))


def _batch(store: RedisHotStore, n: int) -> float:
    fps = [uuid.uuid4().hex * 2 for _ in range(n)]
    owner = uuid.uuid4().hex
    store.claim(fps, owner, 60_000, Interest({fp: [owner] for fp in fps}, 60_000))

    def work() -> None:
        store.lease(fps, owner, 15_000)
        store.drop_unwanted([(fp, owner) for fp in fps])
        store.record_batch(BatchRecord(
            vectors=[({fp: VECTOR for fp in fps}, 60)], forget_attempts=fps,
            free_claims=fps, done=fps, counts={"encoded": n, "batches": 1}))
    return _timed(work)


def measure(single_url: str, cluster_url: str, sizes: list[int], rounds: int
            ) -> dict[str, Any]:
    """Median ms per call on each store, alternating rounds; CROSSSLOT errors counted."""
    single, cluster = RedisHotStore(single_url), RedisHotStore(cluster_url)
    refused = 0
    rows = []
    try:
        before = _crossslot(cluster)
        for n in sizes:
            row: dict[str, Any] = {"fingerprints": n}
            for name, call in (("claim", _claim), ("batch", _batch)):
                times: dict[str, list[float]] = {"single": [], "cluster": []}
                for r in range(rounds + 2):  # two warm-up rounds, not counted
                    for side, store in (("single", single), ("cluster", cluster)):
                        try:
                            ms = call(store, n)
                        except EmbedqError as exc:
                            refused += "CROSSSLOT" in str(exc) or "same key slot" in str(exc)
                            raise
                        if r >= 2:
                            times[side].append(ms)
                one = statistics.median(times["single"])
                many = statistics.median(times["cluster"])
                row[name] = {"single_ms": round(one, 3), "cluster_ms": round(many, 3),
                             "ratio": round(many / one, 2)}
            rows.append(row)
        crossslot = _crossslot(cluster) - before + refused
    finally:
        single.close()
        cluster.close()
    return {"rounds": rounds, "buckets": cluster.buckets.count, "sizes": rows,
            "crossslot_errors": crossslot}


def _crossslot(store: RedisHotStore) -> int:
    stats = store.client.info("errorstats", target_nodes=RedisCluster.PRIMARIES)
    return sum(int(node.get("errorstat_CROSSSLOT", {}).get("count", 0))
               for node in stats.values())


@contextlib.contextmanager
def _one_redis(root: Path) -> Iterator[str]:
    port = free_port()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "redis.log", "ab") as log:
        proc = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(root)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while subprocess.run(["redis-cli", "-p", str(port), "PING"], capture_output=True,
                             text=True).stdout.strip() != "PONG":
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server on port {port} did not answer in 30 s")
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = sorted(set(args.fingerprints))
    if not sizes or sizes[0] < 1 or args.rounds < 1:
        raise ConfigError("--fingerprints takes counts of at least 1 (e.g. 64 1000) and "
                          "--rounds at least 1")
    with tempfile.TemporaryDirectory(prefix="embedq-bench-scale-cluster-") as tmpdir:
        tmp = Path(tmpdir)
        try:
            cluster = LocalRedisCluster(tmp / "cluster", replicas=0)
        except FileNotFoundError as exc:
            raise ConfigError(f"bench scale --cluster starts local Redis servers: {exc}"
                              ) from exc
        cluster.start()
        try:
            with _one_redis(tmp / "single") as single_url:
                report = measure(single_url, cluster.url, sizes, args.rounds)
        finally:
            cluster.stop()
    print(f"bench scale --cluster: one Redis against 3 masters ({report['buckets']} "
          f"buckets), median of {args.rounds} rounds")
    for row in report["sizes"]:
        for name in ("claim", "batch"):
            got = row[name]
            print(f"  {name} {row['fingerprints']:>5}: one Redis {got['single_ms']:.2f} ms, "
                  f"cluster {got['cluster_ms']:.2f} ms, ratio {got['ratio']}")
    print(f"  CROSSSLOT errors: {report['crossslot_errors']}")
    return report
