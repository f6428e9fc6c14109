"""(f) deploy/docker-compose.yml, as the Docker Compose CLI itself resolves it (`docker-compose
config`, which needs no engine): the state volume at BROKER_STATE_DIR, the configuration
read-only at the path the image's CMD names, secrets from the env file, and a stop period
longer than the broker's drain."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from deploy_support import (
    DEPLOY, REPO, Dockerfile, broker_binary, clean_env, cmd_config_path, config_secrets, gen_key,
    load_yaml, run, venv_tool,
)


def _seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    total, number = 0.0, ""
    i = 0
    while i < len(duration):
        c = duration[i]
        if c.isdigit() or c == ".":
            number += c
            i += 1
            continue
        unit = "ms" if duration[i:i + 2] == "ms" else c
        total += float(number) * units[unit]
        number = ""
        i += len(unit)
    return total + (float(number) if number else 0)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> tuple[dict, Path]:
    """The resolved project, from a copy of deploy/ with broker.env made from the example."""
    root = tmp_path_factory.mktemp("compose")
    shutil.copytree(DEPLOY, root / "deploy", ignore=shutil.ignore_patterns("broker.env"))
    shutil.copy(DEPLOY / "broker.env.example", root / "deploy" / "broker.env")
    result = run([venv_tool("docker-compose"), "-f", root / "deploy" / "docker-compose.yml", "config", "--format", "json"],
                 env=clean_env({"DOCKER_CONFIG": str(root / ".docker")}), cwd=root)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), root


def test_compose_config_resolves_one_broker_service(project):
    resolved, _ = project
    assert list(resolved["services"]) == ["broker"]


def test_state_volume_is_mounted_at_the_state_directory(project):
    resolved, _ = project
    broker = resolved["services"]["broker"]
    state_dir = broker["environment"]["BROKER_STATE_DIR"]
    assert state_dir == Dockerfile().runtime.env()["BROKER_STATE_DIR"] == load_yaml(DEPLOY / "broker.yaml")["state"]["directory"]
    volumes = [v for v in broker["volumes"] if v["type"] == "volume"]
    assert [(v["source"], v["target"]) for v in volumes] == [("broker-state", state_dir)]
    assert "broker-state" in resolved["volumes"]
    assert not volumes[0].get("read_only")


def test_configuration_is_mounted_read_only_where_the_command_reads_it(project):
    resolved, root = project
    broker = resolved["services"]["broker"]
    config_path = cmd_config_path(Dockerfile())
    assert broker["command"] == ["serve", "--config", config_path]
    binds = [v for v in broker["volumes"] if v["type"] == "bind"]
    assert [(Path(v["source"]), v["target"], v.get("read_only")) for v in binds] == \
        [(root / "deploy" / "broker.yaml", config_path, True)]


def test_build_uses_the_repository_dockerfile(project):
    resolved, root = project
    build = resolved["services"]["broker"]["build"]
    assert Path(build["context"]) == root and build["dockerfile"] == "Dockerfile"
    assert (REPO / build["dockerfile"]).exists()


def test_hardening_and_stop(project):
    broker = project[0]["services"]["broker"]
    assert broker["user"] == "10001:10001"
    assert broker["read_only"] is True
    assert broker["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in broker["security_opt"]
    assert broker.get("stop_signal", "SIGTERM") == "SIGTERM"
    server = load_yaml(DEPLOY / "broker.yaml")["server"]
    grace = server.get("shutdown_delay_seconds", 10) + server.get("shutdown_grace_seconds", 10)
    assert _seconds(broker["stop_grace_period"]) >= grace + 10
    assert broker["healthcheck"]["test"][-1].endswith("/healthz")
    assert [(p["target"], p["published"]) for p in broker["ports"]] == [(8080, "8080")]
    assert broker["environment"]["BROKER_LISTEN"].endswith(":8080")


def test_env_file_supplies_every_secret_and_the_resolved_service_passes_check_config(project, tmp_path):
    """The service's resolved environment (env file + environment:) with the state key filled
    in, and the mounted configuration: check-config accepts them."""
    resolved, root = project
    environment = dict(resolved["services"]["broker"]["environment"])
    config = load_yaml(DEPLOY / "broker.yaml")
    secrets = config_secrets(config)
    assert secrets.env <= set(environment), f"broker.env.example lacks {secrets.env - set(environment)}"
    binary = broker_binary()
    assert binary.exists(), f"{binary}: build it first, or set TOKEN_BROKER_BINARY"
    environment[secrets.key_env] = gen_key(binary)
    result = run([binary, "check-config", root / "deploy" / "broker.yaml"], env=clean_env(environment), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_filled_in_env_file_stays_out_of_git():
    ignored = run(["git", "-C", REPO, "check-ignore", "-q", "deploy/broker.env"])
    assert ignored.returncode == 0, "deploy/broker.env must be git-ignored"
