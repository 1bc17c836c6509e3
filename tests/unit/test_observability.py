"""deploy/: the alert rules, the Prometheus config and the dashboard's queries pass
promtool, and the alerts fire on the situations they are named for (`promtool test
rules`). That each metric they read is exported is tests/integration/test_observability.py.

promtool comes from `make promtool` (into the venv) or PATH; without it these tests skip
on a laptop and fail in CI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.promql import (
    ALERTS,
    DASHBOARD,
    PROMETHEUS,
    alert_queries,
    dashboard_queries,
    metric_names,
)
from tests.support import CI


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    venv_bin = str(Path(sys.executable).parent)
    found = shutil.which("promtool") or shutil.which("promtool", path=venv_bin)
    if found is None:
        message = "promtool is not installed; run `make promtool`"
        if CI:
            pytest.fail(message + " (CI must provide it: `make test` does)")
        pytest.skip(message + ", or set CI=1 to make this a failure")
    return subprocess.run([found, *args], capture_output=True, text=True, timeout=60)


def assert_ok(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stdout + result.stderr


def test_alert_rules_pass_promtool() -> None:
    result = promtool("check", "rules", str(ALERTS))
    assert_ok(result)
    assert f"{len(alert_queries())} rules found" in result.stdout


def test_prometheus_config_passes_promtool_with_its_rules(tmp_path: Path) -> None:
    # promtool also checks that the scrape key's file exists: the config is checked as
    # written, beside its rules, with that one path moved to a file that holds a key.
    config = yaml.safe_load(PROMETHEUS.read_text())
    key = tmp_path / "api-key"
    key.write_text("a-key")
    for scrape in config["scrape_configs"]:
        scrape["authorization"]["credentials_file"] = str(key)
    path = tmp_path / PROMETHEUS.name
    path.write_text(yaml.safe_dump(config))
    shutil.copy(ALERTS, tmp_path / ALERTS.name)
    result = promtool("check", "config", str(path))
    assert_ok(result)
    assert "1 rule files found" in result.stdout


def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    queries = dashboard_queries()
    assert len(queries) >= 20
    # promtool has no query linter; a recording rule per query gets each one parsed.
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}", "expr": q} for i, q in enumerate(queries)
    ]}]}
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(yaml.safe_dump(rules))
    assert_ok(promtool("check", "rules", str(path)))


def test_dashboard_panels_cover_the_issue_and_use_the_datasource_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    read = set().union(*(metric_names(q) for q in dashboard_queries()))
    for needed in ("embedq_texts_total", "embedq_http_requests_total", "embedq_cache_hits_total",
                   "embedq_semantic_lookups_total", "embedq_queue_depth",
                   "embedq_encode_seconds_bucket", "embedq_jobs", "embedq_failed_total",
                   "embedq_live_workers", "embedq_abandoned_total"):
        assert needed in read, needed
    for panel in panels:
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]


def test_metric_names_skip_functions_labels_and_keywords() -> None:
    expr = ('histogram_quantile(0.99, sum by (le, route) (rate(a_bucket{route="x",s=~"5.."}[5m])))'
            ' / on() group_left b and ignoring(q) c_total offset 1h or vector(0)')
    assert metric_names(expr) == {"a_bucket", "b", "c_total"}


RULE_TESTS = """
rule_files: [{alerts}]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      # The API's model (always exported) has no worker; another model has two.
      - series: 'embedq_live_workers{{instance="api:8000",model="mine",revision="r1"}}'
        values: '0x10'
      - series: 'embedq_live_workers{{instance="api:8000",model="other",revision="r2"}}'
        values: '2x10'
      - series: 'embedq_jobs{{instance="api:8000",status="running"}}'
        values: '1x60'
      - series: 'embedq_job_items_total{{instance="api:8000"}}'
        values: '100x60'
      - series: 'embedq_dependency_up{{instance="api:8000",dependency="database"}}'
        values: '1 1 0 0 0 0'
      - series: 'embedq_dependency_up{{instance="api:8000",dependency="broker"}}'
        values: '1x10'
      - series: 'up{{job="embedq-api",instance="api:8000"}}'
        values: '1x10'
    alert_rule_test:
      - eval_time: 3m
        alertname: EmbedqNoLiveWorkers
        exp_alerts:
          - exp_labels: {{severity: critical, instance: "api:8000"}}
      - eval_time: 5m
        alertname: EmbedqPostgresUnavailable
        exp_alerts:
          - exp_labels: {{severity: critical, instance: "api:8000", dependency: database}}
      - eval_time: 5m
        alertname: EmbedqRedisUnavailable
        exp_alerts: []
      - eval_time: 5m
        alertname: EmbedqApiDown
        exp_alerts: []
      - eval_time: 20m
        alertname: EmbedqJobStalled
        exp_alerts: []
      - eval_time: 61m
        alertname: EmbedqJobStalled
        exp_alerts:
          - exp_labels: {{severity: warning}}
"""


def test_alerts_fire_on_what_they_are_named_for(tmp_path: Path) -> None:
    # promtool compares annotations too: test the rules without them (their text is
    # checked by `check rules` above).
    rules = yaml.safe_load(ALERTS.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    bare = tmp_path / "alerts.yml"
    bare.write_text(yaml.safe_dump(rules))
    path = tmp_path / "alerts_test.yml"
    path.write_text(RULE_TESTS.format(alerts=json.dumps(str(bare))))
    assert_ok(promtool("test", "rules", str(path)))
