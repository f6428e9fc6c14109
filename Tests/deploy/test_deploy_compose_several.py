"""deploy/docker-compose.several-instances.yml, as the Docker Compose CLI resolves it (`docker-compose
config`, no engine needed): three brokers on the postgres backend, no state volume, a PostgreSQL
service they wait for, one password file mounted as a secret where both read it, and a broker
environment that passes check-config."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from deploy_support import DEPLOY, REPO, broker_binary, clean_env, config_secrets, gen_key, load_yaml, run, venv_tool

COMPOSE = "docker-compose.several-instances.yml"


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> tuple[dict, Path]:
    """The resolved project, from a copy of deploy/ with broker.env from its example and a
    password file as the file's header says to make it."""
    root = tmp_path_factory.mktemp("compose-several")
    shutil.copytree(DEPLOY, root / "deploy", ignore=shutil.ignore_patterns("broker.env", "postgres-password"))
    shutil.copy(DEPLOY / "broker.env.example", root / "deploy" / "broker.env")
    (root / "deploy" / "postgres-password").write_text("compose-test-password\n")
    result = run([venv_tool("docker-compose"), "-f", root / "deploy" / COMPOSE, "config", "--format", "json"],
                 env=clean_env({"DOCKER_CONFIG": str(root / ".docker")}), cwd=root)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), root


def test_three_brokers_and_a_database(project):
    resolved, _ = project
    assert sorted(resolved["services"]) == ["broker", "postgres"]
    broker = resolved["services"]["broker"]
    assert broker["deploy"]["replicas"] == 3
    assert broker["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert resolved["services"]["postgres"]["image"].startswith("postgres:15")
    assert resolved["services"]["postgres"]["healthcheck"]["test"][-1].startswith("pg_isready")


def test_brokers_keep_no_state_of_their_own(project):
    resolved, _ = project
    broker = resolved["services"]["broker"]
    assert broker["environment"]["BROKER_STATE_BACKEND"] == "postgres"
    assert [v for v in broker["volumes"] if v["type"] == "volume"] == []
    assert broker["read_only"] is True and broker["user"] == "10001:10001"
    assert [v["target"] for v in resolved["services"]["postgres"]["volumes"]] == ["/var/lib/postgresql/data"]


def test_each_broker_has_its_own_loopback_port(project):
    ports = project[0]["services"]["broker"]["ports"]
    assert [(p["target"], p["published"], p["host_ip"]) for p in ports] == [(8080, "8080-8082", "127.0.0.1")]


def test_one_password_file_reaches_both_services_where_they_read_it(project):
    resolved, root = project
    assert Path(resolved["secrets"]["postgres_password"]["file"]) == root / "deploy" / "postgres-password"
    broker, postgres = resolved["services"]["broker"], resolved["services"]["postgres"]
    for service, variable in ((broker, "BROKER_POSTGRES_PASSWORD_FILE"), (postgres, "POSTGRES_PASSWORD_FILE")):
        assert [s["source"] for s in service["secrets"]] == ["postgres_password"]
        assert service["environment"][variable] == "/run/secrets/postgres_password"
    url = broker["environment"]["BROKER_POSTGRES_URL"]
    assert url.startswith(f"postgres://{postgres['environment']['POSTGRES_USER']}@postgres:5432/{postgres['environment']['POSTGRES_DB']}")
    assert ":" not in url.split("//", 1)[1].split("@", 1)[0], "no password in the URL"


def test_the_password_file_stays_out_of_git():
    assert run(["git", "-C", REPO, "check-ignore", "-q", "deploy/postgres-password"]).returncode == 0


def test_the_resolved_broker_environment_passes_check_config(project, tmp_path):
    """The brokers' environment (env file + environment:) with the state key filled in and the
    secret's path pointed at the password file: check-config accepts it."""
    resolved, root = project
    environment = dict(resolved["services"]["broker"]["environment"])
    secrets = config_secrets(load_yaml(DEPLOY / "broker.yaml"))
    binary = broker_binary()
    assert binary.exists(), f"{binary}: build it first, or set TOKEN_BROKER_BINARY"
    environment[secrets.key_env] = gen_key(binary)
    environment["BROKER_POSTGRES_PASSWORD_FILE"] = str(root / "deploy" / "postgres-password")
    result = run([binary, "check-config", root / "deploy" / "broker.yaml"], env=clean_env(environment), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    environment["BROKER_POSTGRES_PASSWORD_FILE"] = str(tmp_path / "missing")
    result = run([binary, "check-config", root / "deploy" / "broker.yaml"], env=clean_env(environment), cwd=tmp_path)
    assert result.returncode != 0 and "BROKER_POSTGRES_PASSWORD_FILE" in result.stdout + result.stderr
