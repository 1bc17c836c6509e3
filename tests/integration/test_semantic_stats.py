"""Served hits by feedback (confirmed, wrong, unverified) and `explain`'s checks through
every surface that exposes them: `embedq serve` (lookup, stats, /metrics) and `embedq
cache` (lookup --explain, stats), over real Postgres, Redis and a worker.

The worker runs the hashing encoder: different texts get unrelated vectors, so the
namespace's base threshold is -1.0 and its entry serves every query below (no two of them
one word apart, the same numbers, no times or opposites: neither the guard nor the
verifier refuses them; see test_semantic_feedback.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from embedq.semantic.budget import just_above
from tests import support
from tests.conftest import Cluster
from tests.integration.test_api_support import ApiServer

pytestmark = pytest.mark.integration

SERVED = 'embedq_semantic_served_hits{feedback="%s"}'


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Iterator[ApiServer]:
    env = dict(cluster.env, EMBEDQ_DATA_DIR=str(cluster.tmp / "semantic-stats"))
    server = ApiServer(env, cluster.tmp / "semantic-stats.log").start()
    try:
        yield server
    finally:
        server.stop()


def _ok(api: ApiServer, method: str, path: str, body: Any = None) -> dict[str, Any]:
    got = httpx.request(method, f"{api.url}/v1/semantic-cache/{path}", json=body, timeout=30)
    assert got.status_code == 200, got.text
    out: dict[str, Any] = got.json()
    return out


def _served_gauges(api: ApiServer) -> dict[str, float]:
    text = httpx.get(api.url + "/metrics", timeout=30).text
    values = dict(line.rsplit(" ", 1) for line in text.splitlines()
                  if line.startswith("embedq_semantic_served_hits{"))
    return {v: float(values[SERVED % v]) for v in ("correct", "wrong", "none")}


def _cli(cluster: Cluster, tmp_path: Path, *args: str) -> tuple[int, Any]:
    env = dict(cluster.env, EMBEDQ_DATA_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "embedq.cli", "cache", *args], env=env,
                          capture_output=True, text=True, cwd=support.ROOT, timeout=120)
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_stats_and_metrics_count_hits_by_feedback_and_explain_names_the_checks(
        api: ApiServer, cluster: Cluster, tmp_path: Path, salt: str) -> None:
    ns = f"served-{salt}"
    _ok(api, "PUT", f"{ns}/config", {"threshold": -1.0})
    entry = _ok(api, "PUT", ns, {"query": f"{salt} ledger stored question about weekly "
                                          "reports", "payload": 1})["id"]
    before = _served_gauges(api)
    looked = [_ok(api, "POST", f"{ns}/lookup", {"query": f"{salt} ledger asked {word}",
                                                "explain": True})
              for word in ("alpha", "bravo", "charlie", "delta")]
    assert all(got["hit"] and got["matches"][0]["id"] == entry for got in looked)
    [served] = looked[0]["considered"]
    assert served["refused"] is None
    names = [c["name"] for c in served["checks"]]
    assert names[:4] == ["threshold", "live", "guard", "band"]
    assert names[-2:] == ["filter", "negative"]
    assert {"number", "negation", "direction", "time", "content"} <= set(names)
    assert {c["result"] for c in served["checks"]} <= {"pass", "skipped"}

    hit_ids = [got["matches"][0]["hit_id"] for got in looked]
    _ok(api, "POST", f"{ns}/feedback", {"id": hit_ids[0], "correct": True})
    _ok(api, "POST", f"{ns}/feedback", {"id": hit_ids[1], "correct": True})
    _ok(api, "POST", f"{ns}/feedback", {"id": hit_ids[2], "correct": False})
    expected = {"correct": 2, "wrong": 1, "unverified": 1, "unverified_share": 0.25,
                "over_trust": 0}
    stats = _ok(api, "GET", f"{ns}/stats")
    assert {k: stats["served"][k] for k in expected} == expected
    assert stats["feedback"] == {"correct": 2, "wrong": 1}
    after = _served_gauges(api)
    assert {k: after[k] - before[k] for k in after} == {"correct": 2, "wrong": 1, "none": 1}

    code, out = _cli(cluster, tmp_path, "stats", ns)
    assert code == 0 and {k: out["served"][k] for k in expected} == expected
    code, out = _cli(cluster, tmp_path, "lookup", ns, f"{salt} ledger asked echo",
                     "--explain")
    assert code == 0 and [c["name"] for c in out["considered"][0]["checks"]] == names
    code, out = _cli(cluster, tmp_path, "stats", ns)
    assert (out["served"]["unverified"], out["served"]["unverified_share"]) == (2, 0.4)


def _over_trust_gauge(api: ApiServer) -> float:
    text = httpx.get(api.url + "/metrics", timeout=30).text
    [value] = [line.rsplit(" ", 1)[1] for line in text.splitlines()
               if line.startswith("embedq_semantic_served_over_trust ")]
    return float(value)


def test_hits_served_over_a_trust_score_are_counted_in_stats_and_metrics(
        api: ApiServer, salt: str) -> None:
    # The hashing encoder's words are unrelated to one another, so the verifier's content
    # slot refuses the replaced verb (the score in the band the model checks run in);
    # a namespace that trusts the pair's score serves it.
    ns = f"over-trust-{salt}"
    _ok(api, "PUT", ns, {"query": f"{salt} how do I upload photos of the damage to my claim",
                         "payload": 1})
    asked = {"query": f"{salt} how can I attach photos of the damage to my claim",
             "explain": True}
    score = _ok(api, "POST", f"{ns}/lookup", asked | {"threshold": -1.0})["considered"][0][
        "score"]
    _ok(api, "PUT", f"{ns}/config", {"max_false_hit_rate": 0.5,
                                     "threshold": max(-1.0, score - 0.2),
                                     "trust_score": max(-1.0, score - 0.1)})
    before = _over_trust_gauge(api)
    got = _ok(api, "POST", f"{ns}/lookup", asked)
    assert got["hit"], got
    checks = [(c["name"], c["result"]) for c in got["considered"][0]["checks"]]
    assert ("content", "fail") in checks and ("trust", "pass") in checks
    assert _ok(api, "GET", f"{ns}/stats")["served"]["over_trust"] == 1
    assert _over_trust_gauge(api) - before == 1
    # A hit that passed every check is not one of them.
    assert _ok(api, "POST", f"{ns}/lookup", {
        "query": f"{salt} how do I upload photos of the damage to my claim"})["hit"]
    assert _ok(api, "GET", f"{ns}/stats")["served"]["over_trust"] == 1
    # On Postgres too, a wrong verdict on the trusted hit raises the trust score just past
    # it, and not the threshold.
    judged = _ok(api, "POST", f"{ns}/feedback", {"id": got["matches"][0]["hit_id"],
                                                  "correct": False})
    assert judged["trust_score"] == pytest.approx(just_above(got["matches"][0]["score"]))
    assert judged["threshold"] == pytest.approx(max(-1.0, score - 0.2))
