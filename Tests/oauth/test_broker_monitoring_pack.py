"""Every metric the monitoring pack (deploy/monitoring: the alert rules and the Grafana dashboard)
names is one a real broker exports, with the labels the pack matches on: a broker signed in at
the real authorization server, whose refresh and revocation that server then fails, calling an
API through the proxy, writing a snapshot, scraped at /metrics."""

from __future__ import annotations

import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from support.broker import wait_for
from support.recording_upstream import RecordingUpstream

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "deploy"))
from monitoring_pack import (  # noqa: E402 (the pack's reader lives beside the pack's own tests)
    NOT_SCRAPED_HERE, OPERATIONS, PROMETHEUS_SERIES, load_dashboard, metric_names, pack_expressions, registered,
    rule_alerts, selectors,
)

# Labels Prometheus adds to every series it scrapes, not the broker.
TARGET_LABELS = {"job", "instance", "namespace", "pod", "service"}


def scrape(broker) -> dict[str, set[str]]:
    """Each sample name of /metrics, with the label names its series have."""
    answer = requests.get(broker.url("/metrics"), timeout=10)
    assert answer.status_code == 200, answer.status_code
    samples: dict[str, set[str]] = {}
    for line in answer.text.splitlines():
        if line and not line.startswith("#"):
            match = re.match(r"([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s", line)
            assert match, line
            samples.setdefault(match.group(1), set()).update(re.findall(r'(\w+)="', match.group(2) or ""))
    return samples


@pytest.fixture
def exported(broker_factory, auth_server) -> dict[str, set[str]]:
    upstream = RecordingUpstream()
    try:
        broker, app, _, _ = broker_factory(
            provider_extra=f"    api_base_url: {upstream.base_url}\n    api_allow_private_addresses: true\n",
            env={"BROKER_SNAPSHOT_INTERVAL_SECONDS": "1"})
        app.login()
        assert app.call("GET", "/proxy/dot/items").status_code == 200
        auth_server.inject_fault("token", status=503, body='{"error": "temporarily_unavailable"}', count=1)
        assert app.call("POST", "/refresh").status_code >= 500
        auth_server.inject_fault("revoke", status=503, body="down", count=1)
        revoked = app.call("POST", "/revoke")
        assert revoked.status_code == 200 and revoked.json()["provider_revocation"] == "queued", revoked.text
        unknown = requests.get(broker.url("/token"), headers={"Authorization": f"Bearer tbs_{secrets.token_urlsafe(32)}"}, timeout=10)
        assert unknown.status_code == 401
        assert requests.get(broker.url("/readyz"), timeout=10).status_code == 200
        assert wait_for(lambda: "broker_snapshot_duration_seconds_count" in scrape(broker), timeout=30)  # the dashboard draws it
        return scrape(broker)
    finally:
        upstream.close()


def test_every_metric_and_label_the_pack_names_is_the_brokers(exported):
    alerts, dashboard = rule_alerts(), load_dashboard()
    unknown, wrong = [], []
    for where, expr in pack_expressions(alerts, dashboard).items():
        names = metric_names(expr)
        assert names, f"{where}: no metric in {expr!r}"
        for name in sorted(names - PROMETHEUS_SERIES):
            if name not in exported and not (name in NOT_SCRAPED_HERE and registered(name) and name in OPERATIONS.read_text()):
                unknown.append(f"{where}: {name}")
        # A matcher on a label the broker does not write (`outcomes=`, `code=`) matches nothing.
        for metric, labels in selectors(expr):
            if metric in exported and not labels - TARGET_LABELS <= exported[metric]:
                wrong.append(f"{where}: {metric} has no label {sorted(labels - TARGET_LABELS - exported[metric])}")
    assert not unknown, "metrics the broker does not export:\n" + "\n".join(unknown)
    assert not wrong, "\n".join(wrong)
    used = set().union(*map(metric_names, pack_expressions(alerts, dashboard).values()))
    assert set(NOT_SCRAPED_HERE) <= used, "NOT_SCRAPED_HERE lists a metric the pack does not use"


def test_promtool_accepts_what_the_broker_exports(broker_factory):
    """What Prometheus's own linter says of a real broker's /metrics: nothing (a counter named
    `_total` typed a gauge, as process_cpu_seconds_total once was, is flagged)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed: Debian's prometheus package has it (make test installs it)")
    broker, app, _, _ = broker_factory()
    app.login()
    answer = requests.get(broker.url("/metrics"), timeout=10)
    assert answer.status_code == 200
    checked = subprocess.run([promtool, "check", "metrics"], input=answer.text, capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "# TYPE process_cpu_seconds_total counter" in answer.text
