"""(d) Every broker configuration in deploy/ passes `token-broker check-config` with its
secrets supplied the way its deployment supplies them (placeholder values), uses presets, and
never holds a secret itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy_support import (
    DEPLOY, KUBERNETES_BASE, SYSTEMD, broker_binary, clean_env, config_secrets, gen_key, load_yaml,
    load_yaml_documents, placeholder_secret_env, run,
)
import yaml


@pytest.fixture(scope="module")
def binary() -> Path:
    path = broker_binary()
    assert path.exists(), f"{path}: build it first (swift build), or set TOKEN_BROKER_BINARY"
    return path


def configmap_config() -> dict:
    """The file kustomize's configMapGenerator makes the ConfigMap of (test_deploy_kubernetes.py
    checks that the rendered ConfigMap holds it unchanged)."""
    return load_yaml(KUBERNETES_BASE / "broker.yaml")


def all_configs() -> dict[str, dict]:
    return {
        "deploy/broker.yaml": load_yaml(DEPLOY / "broker.yaml"),
        "deploy/kubernetes/base/broker.yaml": configmap_config(),
        "deploy/systemd/broker.yaml": load_yaml(SYSTEMD / "broker.yaml"),
    }


@pytest.mark.parametrize("name", sorted(all_configs()))
def test_no_inline_secret_and_presets_only(name):
    config = all_configs()[name]
    text = yaml.safe_dump(config)
    assert "client_secret:" not in text
    assert config["providers"], "at least one provider"
    for provider_id, provider in config["providers"].items():
        assert "preset" in provider, f"{name}: providers.{provider_id} without a preset"
        assert ("client_secret_env" in provider) != ("client_secret_file" in provider)
    assert config["apps"], "at least one app"
    assert config["server"]["public_url"].startswith("https://")
    assert config["log"]["format"] == "json"
    assert config["state"]["directory"] == "/var/lib/token-broker"


def test_container_configs_agree():
    """The Compose/image configuration and the Kubernetes ConfigMap are the same file."""
    assert configmap_config() == load_yaml(DEPLOY / "broker.yaml")


def test_container_config_passes_check_config(binary, tmp_path):
    config = load_yaml(DEPLOY / "broker.yaml")
    env = clean_env(placeholder_secret_env(config, gen_key(binary)))
    result = run([binary, "check-config", DEPLOY / "broker.yaml"], env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_configmap_config_passes_check_config(binary, tmp_path):
    env = clean_env(placeholder_secret_env(configmap_config(), gen_key(binary)))
    result = run([binary, "check-config", KUBERNETES_BASE / "broker.yaml"], env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_systemd_config_passes_check_config_in_a_credentials_directory(binary, tmp_path):
    """The unit loads broker.yaml and the secret files side by side into %d; so does this test."""
    config = load_yaml(SYSTEMD / "broker.yaml")
    secrets = config_secrets(config)
    assert not secrets.env, "the systemd configuration takes its secrets from credentials (files)"
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "broker.yaml").write_text((SYSTEMD / "broker.yaml").read_text())
    for name in secrets.files:
        assert "/" not in name, f"{name}: name credentials relative to the configuration file"
        (credentials / name).write_text(gen_key(binary) if name == secrets.key_file else f"placeholder-{name}")
    result = run([binary, "check-config", credentials / "broker.yaml"], env=clean_env(), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    # A missing credential is reported by name.
    (credentials / sorted(secrets.files - {secrets.key_file})[0]).unlink()
    result = run([binary, "check-config", credentials / "broker.yaml"], env=clean_env(), cwd=tmp_path)
    assert result.returncode != 0


def test_placeholder_state_key_is_refused(binary, tmp_path):
    """Left unfilled, the example env file's state key stops the broker: no deployment runs on
    a published key."""
    env_file = dict(line.split("=", 1) for line in (DEPLOY / "broker.env.example").read_text().splitlines()
                    if line and not line.startswith("#"))
    result = run([binary, "check-config", DEPLOY / "broker.yaml"], env=clean_env(env_file), cwd=tmp_path)
    assert result.returncode != 0
    assert "BROKER_STATE_KEY" in result.stdout + result.stderr
    secret = next(doc for doc in load_yaml_documents(KUBERNETES_BASE / "secret.yaml") if doc["kind"] == "Secret")
    result = run([binary, "check-config", DEPLOY / "broker.yaml"], env=clean_env(secret["stringData"]), cwd=tmp_path)
    assert result.returncode != 0
    assert "BROKER_STATE_KEY" in result.stdout + result.stderr


def test_check_config_refuses_what_serve_cannot_start_and_serve_exits_2(binary, tmp_path):
    """check-config reaches serve's verdict: with no state key (unset, or a key file that does
    not exist) both refuse, and serve exits 2, the status the systemd unit does not restart. A
    key file others can read is a warning in both, and the start goes on."""
    missing = tmp_path / "missing.yaml"
    missing.write_text(f"providers: {{}}\napps: {{}}\nstate:\n  key_file: {tmp_path / 'no-such-key'}\n"
                       f"  directory: {tmp_path / 'state'}\n")
    unset = tmp_path / "unset.yaml"
    unset.write_text(f"providers: {{}}\napps: {{}}\nstate:\n  directory: {tmp_path / 'state'}\n")
    for config, where in ((missing, f"the state key file {tmp_path / 'no-such-key'} does not exist"),
                          (unset, "BROKER_STATE_KEY is not set")):
        checked = run([binary, "check-config", config], cwd=tmp_path)
        assert checked.returncode == 1 and f"{config}: serve would not start: no state key: {where}" in checked.stderr, checked.stderr
        served = run([binary, "serve", "--config", config, "--listen", "127.0.0.1:0"], cwd=tmp_path)
        assert served.returncode == 2 and f"cannot start: no state key: {where}" in served.stderr, served.stderr
        development = run([binary, "check-config", "--dev", config], cwd=tmp_path)
        assert development.returncode == 0, development.stderr
    assert not (tmp_path / "state").exists(), "a refused start creates nothing"

    key = tmp_path / "no-such-key"
    key.write_text(gen_key(binary) + "\n")
    key.chmod(0o644)
    warned = run([binary, "check-config", missing], cwd=tmp_path)
    assert warned.returncode == 0, warned.stderr
    assert f"warning: the state key file {key} can be read by other users (mode 0644)" in warned.stderr
    key.chmod(0o600)
    quiet = run([binary, "check-config", missing], cwd=tmp_path)
    assert quiet.returncode == 0 and "warning" not in quiet.stderr, quiet.stderr
