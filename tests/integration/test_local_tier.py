"""Every producer process keeps the vectors it read or received in a memory tier in
front of Redis, and the cluster says which fingerprints and namespaces are hot."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from embedq.fingerprint import fingerprint
from tests.conftest import Cluster
from tests.integration.test_api_support import ApiServer

pytestmark = pytest.mark.integration


def test_a_text_asked_again_is_answered_from_this_process(cluster: Cluster, salt: str) -> None:
    service = cluster.service()
    try:
        text = f"{salt} a hot document"
        first = service.embed([text])
        assert first.outcomes[0].source == "computed"
        again = service.embed([text, text])
        assert [o.source for o in again.outcomes] == ["local", "local"]
        assert (again.vectors()[0] == first.vectors()[0]).all()
        other = cluster.service()  # another process's tier is its own: it asks Redis
        try:
            assert other.embed([text]).outcomes[0].source == "hot"
        finally:
            other.close()
        assert service.stats()["cache_hits_local"] >= 1  # per distinct text
    finally:
        service.close()


def test_a_zero_bound_sends_every_lookup_to_redis(cluster: Cluster, salt: str) -> None:
    service = cluster.service(local_tier_mb=0)
    try:
        text = f"{salt} not kept here"
        service.embed([text])
        assert service.embed([text]).outcomes[0].source == "hot"
    finally:
        service.close()


def test_embedq_stats_lists_the_hottest_fingerprints(cluster: Cluster, salt: str) -> None:
    service = cluster.service()
    try:
        hot_text = f"{salt} asked by every session"
        for _ in range(30):
            service.embed([hot_text, f"{salt} once {_}"])
        service.stats()  # flushes: the process publishes its hot keys
        spec = service.spec()
        fp = fingerprint(spec, hot_text)
    finally:
        service.close()
    done = subprocess.run([sys.executable, "-m", "embedq.cli", "stats", "--json"],
                          env=cluster.env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    hottest = json.loads(done.stdout)["hot_keys"]["fingerprint"]
    # Ranked by count; other live processes of the session (its worker, a module's API)
    # publish theirs into the same Redis, and one of them may be hotter still: what this
    # test asked is placed by its own count, above every text it asked once.
    counts = [count for _, count in hottest]
    assert counts == sorted(counts, reverse=True)
    ranked = [key for key, _ in hottest]
    assert fp in ranked and dict(hottest)[fp] >= 30, hottest
    once = {fingerprint(spec, f"{salt} once {n}") for n in range(30)}
    assert not once & set(ranked[:ranked.index(fp)])
    text_out = subprocess.run([sys.executable, "-m", "embedq.cli", "stats"],
                              env=cluster.env, capture_output=True, text=True, timeout=60)
    assert "hottest fingerprints" in text_out.stdout and fp in text_out.stdout


@pytest.fixture
def api(cluster: Cluster) -> Iterator[ApiServer]:
    with ApiServer(cluster.env, cluster.tmp / "api-local-tier.log") as server:
        yield server


def test_metrics_export_the_memory_tier_and_the_hot_keys(api: ApiServer, salt: str) -> None:
    text = f"{salt} served twice by one API process"
    for _ in range(3):
        resp = httpx.post(api.url + "/v1/embeddings", json={"input": text},
                          timeout=60)
        assert resp.status_code == 200, resp.text
    exposition = httpx.get(api.url + "/metrics", timeout=30).text
    lines = exposition.splitlines()
    local_hits = [ln for ln in lines if ln.startswith('embedq_cache_hits_total{tier="local"}')]
    assert local_hits and float(local_hits[0].split()[-1]) >= 2
    assert any(ln.startswith("embedq_local_tier_entries ") and float(ln.split()[-1]) >= 1
               for ln in lines)
    hot = [ln for ln in lines if ln.startswith("embedq_hot_key_asks{")]
    assert any('kind="fingerprint"' in ln and float(ln.split()[-1]) >= 3 for ln in hot), hot
