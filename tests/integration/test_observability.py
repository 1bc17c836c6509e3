"""Every metric the Grafana dashboard and the Prometheus alert rules read is one a real
`embedq serve` exports, on a real cluster (worker, Redis, Postgres), after the traffic that
makes each family appear: embeddings (encoded, then from cache), a semantic-cache entry
and lookup, and a bulk job."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import Cluster
from tests.integration.test_api_support import ApiServer
from tests.promql import SYNTHETIC, alert_queries, dashboard_queries, exported_names, metric_names
from tests.support import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Iterator[ApiServer]:
    with ApiServer(cluster.env, cluster.tmp / "api-observability.log") as server:
        yield server


def traffic(api: ApiServer, salt: str) -> None:
    texts = [f"{salt} observed {i}" for i in range(5)]
    for _ in range(2):  # computed, then answered from the hot tier
        r = httpx.post(api.url + "/v1/embeddings", json={"input": texts}, timeout=60)
        assert r.status_code == 200, r.text
    r = httpx.put(api.url + f"/v1/semantic-cache/obs-{salt}",
                  json={"query": "how do I reset my password", "payload": "see settings"},
                  timeout=60)
    assert r.status_code == 200, r.text
    r = httpx.post(api.url + f"/v1/semantic-cache/obs-{salt}/lookup",
                   json={"query": "how do I reset my password"}, timeout=60)
    assert r.status_code == 200 and r.json()["hit"], r.text
    r = httpx.post(api.url + "/v1/jobs", json={"input": [f"{salt} job {i}" for i in range(3)]},
                   timeout=60)
    assert r.status_code == 202, r.text
    status_url = r.json()["status_url"]
    wait_until(lambda: httpx.get(status_url, timeout=30).json()["status"] == "succeeded", 60,
               "the job succeeding", interval_s=0.2)


def test_dashboard_and_alerts_read_only_metrics_embedq_exports(api: ApiServer, salt: str) -> None:
    traffic(api, salt)
    exposition = httpx.get(api.url + "/metrics", timeout=30).text
    exported = exported_names(exposition)
    for source, queries in (("dashboard", dashboard_queries()), ("alerts", alert_queries())):
        read = set().union(*(metric_names(q) for q in queries)) - SYNTHETIC
        assert read, source
        missing = sorted(read - exported)
        assert not missing, f"{source} reads metrics /metrics does not export: {missing}"


def live_worker_lines(exposition: str) -> list[str]:
    return [line for line in exposition.splitlines() if line.startswith("embedq_live_workers{")]


def test_live_workers_and_dependencies_are_exported(api: ApiServer) -> None:
    # The API's model is always listed, at 0 without a worker: the cluster's worker serves
    # it. Its heartbeat (every 5 s, alive 15 s) may be one beat late on a loaded machine.
    def live() -> bool:
        lines = live_worker_lines(httpx.get(api.url + "/metrics", timeout=30).text)
        return bool(lines) and all(not line.endswith(" 0.0") for line in lines)

    wait_until(live, 20, "the cluster's worker counted live on /metrics", interval_s=0.5)
    exposition = httpx.get(api.url + "/metrics", timeout=30).text
    for dependency in ("hot_store", "broker", "database"):
        assert f'embedq_dependency_up{{dependency="{dependency}"}} 1.0' in exposition
        assert "embedq_scrape_errors_total{part=" in exposition
