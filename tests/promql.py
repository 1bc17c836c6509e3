"""What the deploy/ files ask Prometheus for: the dashboard's and the alert rules' PromQL,
and the metric names those expressions read. Shared by the promtool checks (unit) and
the check against a real /metrics (integration)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "deploy" / "grafana" / "embedq-dashboard.json"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
PROMETHEUS = ROOT / "deploy" / "prometheus" / "prometheus.yml"

# Series Prometheus makes itself, not read from a target.
SYNTHETIC = frozenset({"up"})
_KEYWORDS = frozenset({
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
    "bool", "offset", "inf", "nan",
})
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_WORD = re.compile(r"(?<![\w.])[a-zA-Z_:][a-zA-Z0-9_:]*(?=\s*(\()?)")


def grafana_to_promql(expr: str) -> str:
    """A dashboard query as Prometheus receives it: Grafana's variables filled in."""
    return expr.replace("$__rate_interval", "5m").replace("${datasource}", "")


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [grafana_to_promql(target["expr"])
            for panel in dashboard["panels"] for target in panel.get("targets", [])]


def alert_queries() -> list[str]:
    rules = yaml.safe_load(ALERTS.read_text())
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def metric_names(expr: str) -> set[str]:
    """The metric names an expression reads (functions, keywords and labels left out)."""
    bare = _STRING.sub('""', expr)
    bare = _GROUPING.sub(" ", _MATCHERS.sub(" ", _RANGE.sub(" ", bare)))
    names = set()
    for match in _WORD.finditer(bare):
        word, call = match.group(0), match.group(1)
        if call is None and word.lower() not in _KEYWORDS:
            names.add(word)
    return names


def exported_names(exposition: str) -> set[str]:
    """Sample names in Prometheus text format (`name{labels} value`)."""
    return {re.split(r"[{\s]", line, maxsplit=1)[0]
            for line in exposition.splitlines() if line and not line.startswith("#")}
