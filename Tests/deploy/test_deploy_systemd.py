"""(g) deploy/systemd/token-broker.service: `systemd-analyze verify` accepts it (where systemd is
installed), `systemd-analyze security --offline` rates it, and it has every sandboxing and
lifecycle directive the broker's deployment relies on. Its credentials match broker.yaml."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from deploy_support import (
    SYSTEMD, broker_binary, config_secrets, load_yaml, parse_unit, run, unit_values,
)

UNIT = SYSTEMD / "token-broker.service"
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_systemd = pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed (structural checks still run)")

REQUIRED = {
    "DynamicUser": "yes",
    "StateDirectory": "token-broker",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "NoNewPrivileges": "yes",
    "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
    "CapabilityBoundingSet": "",
    "MemoryDenyWriteExecute": "yes",
    "Restart": "on-failure",
    "KillSignal": "SIGTERM",
    "Environment": "BROKER_STATE_DIR=%S/token-broker",
}


@pytest.fixture(scope="module")
def unit() -> dict:
    return parse_unit(UNIT)


def _testable_copy(tmp_path: Path, text: str | None = None) -> Path:
    """The unit with ExecStart pointing at the built binary (verify checks that it exists)."""
    binary = broker_binary()
    assert binary.exists(), f"{binary}: build it first, or set TOKEN_BROKER_BINARY"
    copy = tmp_path / UNIT.name
    copy.write_text((text or UNIT.read_text()).replace("/usr/local/bin/token-broker", str(binary.resolve())))
    return copy


@needs_systemd
def test_systemd_analyze_verify(tmp_path):
    result = run([SYSTEMD_ANALYZE, "verify", "--man=no", _testable_copy(tmp_path)])
    assert result.returncode == 0, result.stderr
    problems = [line for line in result.stderr.splitlines() if UNIT.name in line]
    assert not problems, "\n".join(problems)


@needs_systemd
def test_verify_reports_a_bad_directive(tmp_path):
    """The check above can fail: an unknown key and an unknown system-call group are reported."""
    broken = UNIT.read_text().replace("UMask=0077", "UMask=0077\nProtectSystems=strict\nSystemCallFilter=@sytem-service")
    result = run([SYSTEMD_ANALYZE, "verify", "--man=no", _testable_copy(tmp_path, broken)])
    assert "ProtectSystems" in result.stderr and "@sytem-service" in result.stderr


@needs_systemd
def test_security_exposure_is_low(tmp_path):
    result = run([SYSTEMD_ANALYZE, "security", "--offline=true", "--no-pager", _testable_copy(tmp_path)])
    assert result.returncode == 0, result.stderr
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", result.stdout)
    assert match, result.stdout[-500:]
    assert float(match.group(1)) <= 1.5, result.stdout[-2000:]


def test_required_directives(unit):
    service = dict(unit["Service"])
    for key, value in REQUIRED.items():
        assert value in unit_values(unit, "Service", key), f"{key}={value} missing"
    assert "@system-service" in unit_values(unit, "Service", "SystemCallFilter")
    assert unit_values(unit, "Service", "ProtectProc") == ["invisible"]
    server = load_yaml(SYSTEMD / "broker.yaml")["server"]
    assert int(service["TimeoutStopSec"]) >= 10 + server.get("shutdown_delay_seconds", 10) + server.get("shutdown_grace_seconds", 10)
    assert service["RestartPreventExitStatus"] == "2", "an invalid configuration (exit 2) is not restarted"
    assert unit_values(unit, "Install", "WantedBy") == ["multi-user.target"]
    assert "network-online.target" in unit_values(unit, "Unit", "After")


def test_exec_start_reads_its_configuration_from_the_credentials(unit):
    exec_start = unit_values(unit, "Service", "ExecStart")
    assert exec_start == ["/usr/local/bin/token-broker serve --config %d/broker.yaml"]
    help_text = run([broker_binary(), "serve", "--help"]).stdout
    assert "--config" in help_text


def test_every_secret_of_the_configuration_is_a_credential(unit):
    """broker.yaml names its secrets relative to itself; each is a LoadCredential= of the unit,
    loaded from the same directory as the configuration, so the relative paths hold in both."""
    credentials = dict(value.split(":", 1) for value in unit_values(unit, "Service", "LoadCredential"))
    assert credentials["broker.yaml"] == "/etc/token-broker/broker.yaml"
    secrets = config_secrets(load_yaml(SYSTEMD / "broker.yaml"))
    assert secrets.files and not secrets.env
    for name in secrets.files:
        assert name in credentials, f"no LoadCredential={name}:..."
        assert credentials[name] == f"/etc/token-broker/{name}"
    assert set(credentials) == secrets.files | {"broker.yaml"}, "no credential goes unused"
