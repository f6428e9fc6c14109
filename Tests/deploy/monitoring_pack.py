"""The operators' monitoring pack (deploy/monitoring), read for the tests that check it: its
files, and the metric names and label matchers of its PromQL expressions. Tests/deploy checks the
pack itself; Tests/oauth checks its metrics against a real broker's /metrics."""

from __future__ import annotations

import json
import re
from pathlib import Path

from deploy_support import DEPLOY, REPO, load_yaml

MONITORING = DEPLOY / "monitoring"
RULES = MONITORING / "broker.rules.yml"
PROMETHEUS_RULE = MONITORING / "prometheusrule.yaml"
SERVICE_MONITOR = MONITORING / "servicemonitor.yaml"
DASHBOARD = MONITORING / "grafana-dashboard.json"
RULES_TEST = Path(__file__).resolve().parent / "monitoring_rules_test.yml"
OPERATIONS = REPO / "docs" / "operations.md"
METRICS_SOURCE = REPO / "Sources" / "BrokerCore" / "Metrics" / "BrokerMetrics.swift"

# Metrics the pack names that the broker below cannot show: each only exists once what it counts
# has happened, and that cannot be made to happen here. They are checked against the code that
# registers them instead, and against the metrics docs/operations.md lists.
NOT_SCRAPED_HERE = {
    "broker_state_store_unreachable_total": "only with the PostgreSQL store, once the database is out of reach",
}
# Prometheus's own series: whether the scrape worked.
PROMETHEUS_SERIES = {"up"}


def rule_groups() -> list[dict]:
    return load_yaml(RULES)["groups"]


def rule_alerts() -> list[dict]:
    return [rule for group in rule_groups() for rule in group["rules"] if "alert" in rule]


def load_dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def query_panels(dashboard: dict) -> list[dict]:
    return [panel for panel in dashboard["panels"] if panel["type"] != "row"]


PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
                "offset", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: its identifiers that are not functions,
    keywords, label names or label values."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    return {m.group(1) for m in re.finditer(r"(?<![\w$.:])([A-Za-z_:][\w:]*)(?![\w:])(?!\s*\()", text)
            if m.group(1).lower() not in PROMQL_WORDS}


def dashboard_expressions(dashboard: dict) -> list[str]:
    exprs = [target["expr"] for panel in query_panels(dashboard) for target in panel["targets"]]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            match = re.fullmatch(r"label_values\((.+),\s*\w+\)", variable["definition"])
            assert match, variable["definition"]
            exprs.append(match.group(1))
    return exprs


def selectors(expr: str) -> list[tuple[str, set[str]]]:
    """(metric, label names its matchers use) of each `name{...}` in the expression."""
    return [(m.group(1), set(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", m.group(2))))
            for m in re.finditer(r"([A-Za-z_:][\w:]*)\{([^}]*)\}", expr)]


def pack_expressions(alerts: list[dict], dashboard: dict) -> dict[str, str]:
    """Every PromQL expression of the pack, by where it is."""
    exprs = {f"{RULES.name}: {alert['alert']}": alert["expr"] for alert in alerts}
    exprs.update({f"{DASHBOARD.name}: {i}": expr for i, expr in enumerate(dashboard_expressions(dashboard))})
    return exprs


def registered(metric: str) -> bool:
    """Whether BrokerMetrics.swift registers the counter `metric` (broker_<name>_total)."""
    name = metric.removeprefix("broker_").removesuffix("_total")
    source = METRICS_SOURCE.read_text()
    return bool(re.search(rf'count\(\s*"{name}"', source) or re.search(rf'Self\.name\(\s*"{name}",\s*unit:\s*"total"', source))
