"""deploy/monitoring, the operators' monitoring pack: (a) `promtool check rules` accepts the alert
rules; (b) `promtool test rules` feeds them series (monitoring_rules_test.yml) and the alerts fire
where they must and nowhere else; (c) the PrometheusRule carries the plain file's groups; (d)
the metric names are read from the expressions (Tests/oauth/test_broker_monitoring_pack.py
checks them against a real broker's /metrics); (e) the Grafana
dashboard loads, each panel with its datasource and queries, and promtool parses every query;
(f) every alert's runbook is a heading of docs/operations.md. The ServiceMonitor selects the
Service of deploy/kubernetes/base by its labels and port."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from deploy_support import KUBERNETES_BASE, REPO, load_yaml, run
from monitoring_pack import (
    OPERATIONS, PROMETHEUS_RULE, RULES, RULES_TEST, SERVICE_MONITOR, dashboard_expressions, load_dashboard,
    metric_names, query_panels, rule_alerts, rule_groups,
)

SEVERITIES = {"critical", "warning"}


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed: Debian's prometheus package has it "
                    "(`make test` installs it; apt-get install --no-install-recommends prometheus)")
    return found


@pytest.fixture(scope="module")
def groups() -> list[dict]:
    return rule_groups()


@pytest.fixture(scope="module")
def alerts() -> list[dict]:
    return rule_alerts()


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return load_dashboard()


# --- (a), (b), (c): the rules ----------------------------------------------------------------------

def test_promtool_checks_the_rules(promtool, alerts):
    result = run([promtool, "check", "rules", RULES])
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alerts)} rules found" in result.stdout, result.stdout


def test_promtool_rule_unit_tests_pass(promtool):
    result = run([promtool, "test", "rules", RULES_TEST], cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout, result.stdout


def test_the_unit_tests_see_every_alert_fire_and_stay_quiet(alerts):
    """Each alert of the rules is expected, in the unit tests, both to fire and, somewhere, not to."""
    cases = [case for test in load_yaml(RULES_TEST)["tests"] for case in test["alert_rule_test"]]
    for alert in (rule["alert"] for rule in alerts):
        expected = [case["exp_alerts"] for case in cases if case["alertname"] == alert]
        assert any(expected), f"{alert}: no case where it fires"
        assert any(not e for e in expected), f"{alert}: no case where it stays quiet"
    for alert in ("BrokerServerErrors", "BrokerRefreshesFailing"):
        firing = [a for case in cases if case["alertname"] == alert for a in case["exp_alerts"]]
        assert all(a["exp_labels"]["namespace"] == "prod" for a in firing), \
            f"{alert}: the healthy series (other namespaces) must not fire"


def test_the_prometheus_rule_carries_the_same_groups(groups):
    rule = load_yaml(PROMETHEUS_RULE)
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["kind"] == "PrometheusRule"
    assert rule["metadata"]["namespace"] == load_yaml(KUBERNETES_BASE / "kustomization.yaml")["namespace"]
    assert rule["spec"]["groups"] == groups


def test_every_alert_says_how_bad_it_is_and_where_its_runbook_is(alerts):
    names = [alert["alert"] for alert in alerts]
    assert len(names) == len(set(names)), f"an alert named twice: {names}"
    for alert in alerts:
        name = alert["alert"]
        assert re.fullmatch(r"\d+[smh]", str(alert.get("for", ""))), f"{name}: no `for:`"
        assert alert["labels"]["severity"] in SEVERITIES, name
        annotations = alert["annotations"]
        assert annotations.get("summary") and annotations.get("description"), name
        assert annotations["runbook"] == f"docs/operations.md#{name.lower()}", name


def test_the_pack_covers_what_an_operator_pages_on(alerts):
    """Issue 42: refresh failures, provider revocations, the database, 5xx, readiness, the state
    directory's writes, and an instance Prometheus cannot reach."""
    text = {alert["alert"]: alert["expr"] for alert in alerts}
    for metric in ("broker_refreshes_total", "broker_provider_revocations_failed_total",
                   "broker_provider_revocations_pending", "broker_state_store_unreachable_total",
                   "broker_state_write_failures_total", "up"):
        assert any(metric in names for names in map(metric_names, text.values())), f"no alert on {metric}"
    assert any('status=~"5.."' in expr for expr in text.values()), "no alert on 5xx answers"
    assert sum('route="/readyz"' in expr for expr in text.values()) >= 2, "readiness: not ready, and flapping"


# --- (d): the metric names of the expressions -------------------------------------------------------

def test_metric_names_are_read_from_expressions():
    expr = ('histogram_quantile(0.99, sum by (route, le) (rate(a_bucket{job=~"$job", x="b c"}[$__rate_interval]))) '
            '/ on (job) group_left b_total > bool 1e3 and changes((c > 0)[30m:1m]) or vector(0)')
    assert metric_names(expr) == {"a_bucket", "b_total", "c"}



# --- (e): the dashboard ----------------------------------------------------------------------------

def test_the_dashboard_loads_with_a_datasource_variable(dashboard):
    assert dashboard["schemaVersion"] >= 36
    assert dashboard["uid"] and dashboard["title"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"


def test_every_panel_has_a_datasource_queries_and_an_id_of_its_own(dashboard):
    panels = dashboard["panels"]
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids)), f"panel ids repeat: {ids}"
    assert query_panels(dashboard)
    for panel in query_panels(dashboard):
        title = panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, title
        assert panel["targets"], title
        ref_ids = [target["refId"] for target in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), title
        for target in panel["targets"]:
            assert target["expr"].strip(), title
            assert target["datasource"] == panel["datasource"], title
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0, title


def test_the_dashboard_panels_do_not_overlap(dashboard):
    taken: dict[tuple[int, int], str] = {}
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in taken, f"{panel['title']} overlaps {taken[(x, y)]}"
                taken[(x, y)] = panel["title"]


def test_promtool_parses_every_dashboard_query(promtool, dashboard, tmp_path):
    """Each query, with Grafana's variables filled in, as a recording rule promtool checks."""
    values = {"$__rate_interval": "1m", "$job": ".*", "$instance": ".*"}
    rules = []
    for i, expr in enumerate(dashboard_expressions(dashboard)):
        for variable, value in values.items():
            expr = expr.replace(variable, value)
        assert "$" not in expr, expr
        rules.append({"record": f"dashboard:query_{i}", "expr": expr})
    path = tmp_path / "dashboard.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = run([promtool, "check", "rules", path])
    assert result.returncode == 0, result.stdout + result.stderr


# --- (f): the runbooks -----------------------------------------------------------------------------

def anchors(path: Path) -> set[str]:
    """GitHub's anchors of the Markdown headings (outside code blocks)."""
    found, fenced = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6} (.+)", line)):
            heading = match.group(1).strip().replace("`", "").lower()
            found.add(re.sub(r"[^\w\- ]", "", heading).replace(" ", "-"))
    return found


def test_every_runbook_is_a_heading_of_the_operations_doc(alerts):
    headings = anchors(OPERATIONS)
    for alert in alerts:
        path, _, anchor = alert["annotations"]["runbook"].partition("#")
        assert (REPO / path).resolve() == OPERATIONS.resolve(), alert["alert"]
        assert anchor in headings, f"{alert['alert']}: docs/operations.md has no heading #{anchor}"


# --- the ServiceMonitor ------------------------------------------------------------------------------

def test_the_service_monitor_scrapes_the_brokers_service():
    monitor = load_yaml(SERVICE_MONITOR)
    service = load_yaml(KUBERNETES_BASE / "service.yaml")
    namespace = load_yaml(KUBERNETES_BASE / "kustomization.yaml")["namespace"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1" and monitor["kind"] == "ServiceMonitor"
    assert monitor["metadata"]["namespace"] == namespace
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [namespace]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items(), "the selector misses the Service"
    ports = {port["name"] for port in service["spec"]["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["port"] in ports, f"the Service has no port named {endpoint['port']}"
        assert endpoint["path"] == "/metrics"


def test_the_rules_expect_the_job_the_service_monitor_gives(alerts):
    """Without jobLabel, the Prometheus Operator names the job after the Service."""
    assert "jobLabel" not in load_yaml(SERVICE_MONITOR)["spec"]
    service = load_yaml(KUBERNETES_BASE / "service.yaml")["metadata"]["name"]
    down = next(alert for alert in alerts if alert["alert"] == "BrokerDown")
    assert f'job="{service}"' in down["expr"]
