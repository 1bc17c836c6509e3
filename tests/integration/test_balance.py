"""deploy/haproxy.cfg in front of three real `embedq serve` replicas on Redis and Postgres:
`embedq bench balance` on a Zipf(1.1) stream over 200 namespaces, the shipped bounded-load
hashing against round robin on the same draws.

What is asserted are properties of the routing, read from HAProxy's own counts and each
replica's /metrics: no replica ever had more than 1.25 x the mean requests in flight, each
replica holds exactly the namespaces HAProxy routed to it (loaded on first use), none holds
more than half of the namespaces the stream asked about, the replicas hold less between
them than round robin made them hold, and the hottest namespace was served by more than
one replica."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from embedq.bench import haproxy
from embedq.errors import ConfigError
from tests import support

pytestmark = pytest.mark.integration


def require_haproxy() -> None:
    try:
        haproxy.binary()
    except ConfigError as exc:
        support.require("haproxy (`make haproxy`)", exc)


def test_the_shipped_file_is_valid_in_every_mode_it_is_compared_in(tmp_path: Path) -> None:
    require_haproxy()
    text = haproxy.default_config().read_text()
    env = {"BALANCER_BIND": "127.0.0.1:1", "BALANCER_SOCKET": str(tmp_path / "stats.sock"),
           **{f"BALANCER_API_{n}": f"127.0.0.1:{n}" for n in (1, 2, 3)}}
    for mode in haproxy.MODES:
        config = haproxy.variant(text, mode)
        assert ("\n    hash-balance-factor 125\n" in config) == (mode == "bounded-all")
        rules, limits = "\n    use-server " in config, " maxconn 5000\n" in config
        assert rules == limits == (mode == "bounded")
        (tmp_path / f"{mode}.cfg").write_text(config)
        done = subprocess.run([haproxy.binary(), "-c", "-q", "-f", str(tmp_path / f"{mode}.cfg")],
                              env=env, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
    with pytest.raises(ConfigError, match=r"start from deploy/haproxy\.cfg"):
        haproxy.variant("backend semantic\n    balance source\n", "roundrobin")


def test_bounded_loads_keep_replicas_within_a_quarter_of_the_mean_and_namespaces_apart(
    redis_url: str, pg_url: str
) -> None:
    require_haproxy()
    tag = uuid.uuid4().hex[:8]
    env = support.cluster_env(redis_url, pg_url, encoder="hashing", model=f"lb-{tag}",
                              online_encode="local")
    done = subprocess.run(
        [sys.executable, "-m", "embedq.cli", "bench", "balance", "--namespaces", "200",
         "--entries", "1", "--requests", "600", "--callers", "12",
         "--modes", "bounded", "roundrobin", "--no-reference", "--json"],
        env=env, cwd=support.ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    bounded, robin = report["modes"]
    assert (bounded["mode"], robin["mode"]) == ("bounded", "roundrobin")
    for row in (bounded, robin):  # every lookup answered, each counted once by HAProxy
        assert sum(r["requests"] for r in row["replicas"]) == 600
        assert row["hot"]["requests"] == report["hot_requests"] > 0
    assert bounded["load_peak"] <= 1.25, bounded["replicas"]
    assert max(r["peak_in_flight"] for r in bounded["replicas"]) <= 5  # 1.25 x 12 / 3
    for row in (bounded, robin):  # a replica holds what it was routed, nothing else
        for replica in row["replicas"]:
            assert replica["memory"]["namespaces"] == replica["namespaces"] > 0, replica
            assert replica["memory"]["evictions"] == 0  # the default budget holds them all
            assert replica["memory"]["bytes"] > 0
    # Round robin sends a namespace's lookups to every replica, the ring to its own first.
    held = [sum(r["memory"]["bytes"] for r in row["replicas"]) for row in (bounded, robin)]
    assert held[0] < held[1], (held, bounded["copies"], robin["copies"])
    # A cold namespace stays home: a replica holds its arc of the ring and the hot few.
    asked = sum(bounded["copies"].values())
    assert max(r["namespaces"] for r in bounded["replicas"]) <= asked / 2, bounded["copies"]
    assert bounded["hot"]["replicas"] >= 2, bounded["hot"]  # the hot namespace spilled over
    assert max(bounded["hot"]["per_replica"].values()) < 1
    assert "load peak" in done.stdout
