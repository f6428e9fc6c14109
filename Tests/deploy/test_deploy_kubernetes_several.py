"""deploy/kubernetes/several-instances, as the real `kubectl kustomize` renders it, checked for
what several brokers on PostgreSQL need: three replicas spread over nodes and zones, rolling
updates that keep three ready, a PodDisruptionBudget, no volume, the postgres backend, the
single-instance pod otherwise, and a configuration that passes check-config for it. Schema
validation and the checks both overlays share: test_deploy_kubernetes.py."""

from __future__ import annotations

import copy

import pytest
import yaml

from deploy_support import (
    KUBERNETES, KUBERNETES_SEVERAL, Rendered, broker_binary, clean_env, gen_key, placeholder_secret_env,
    render, run,
)


@pytest.fixture(scope="module")
def rendered() -> Rendered:
    return render(KUBERNETES_SEVERAL)


@pytest.fixture(scope="module")
def single() -> Rendered:
    return render(KUBERNETES)


def pod_labels(rendered: Rendered) -> dict:
    return rendered.deployment["spec"]["template"]["metadata"]["labels"]


def test_three_replicas_roll_without_losing_one_and_no_volume_remains(rendered):
    assert not rendered.all("PersistentVolumeClaim")
    deployment = rendered.deployment["spec"]
    assert deployment["replicas"] == 3
    assert deployment["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    pod = rendered.pod
    assert not [v for v in pod["volumes"] if "persistentVolumeClaim" in v]
    state_dir = rendered.broker_config()["state"]["directory"]
    assert state_dir not in {m["mountPath"] for m in rendered.container["volumeMounts"]}
    assert {m["name"] for m in rendered.container["volumeMounts"]} <= {v["name"] for v in pod["volumes"]}, \
        "every mount has its volume"
    assert rendered.env()["BROKER_STATE_BACKEND"] == "postgres"


def test_the_disruption_budget_covers_the_broker_pods(rendered):
    budget = rendered.one("PodDisruptionBudget")["spec"]
    assert budget["maxUnavailable"] == 1 < rendered.deployment["spec"]["replicas"]
    assert budget["selector"]["matchLabels"] and budget["selector"]["matchLabels"].items() <= pod_labels(rendered).items()


def test_the_replicas_spread_over_nodes_and_zones(rendered):
    constraints = rendered.pod["topologySpreadConstraints"]
    assert sorted(c["topologyKey"] for c in constraints) == ["kubernetes.io/hostname", "topology.kubernetes.io/zone"]
    for constraint in constraints:
        assert constraint["whenUnsatisfiable"] == "ScheduleAnyway", "a preference: never a Pending pod"
        assert constraint["maxSkew"] == 1
        # It counts the broker's pods: those the Deployment selects, not some other label.
        selector = constraint["labelSelector"]["matchLabels"]
        assert selector == rendered.deployment["spec"]["selector"]["matchLabels"]
        assert selector.items() <= pod_labels(rendered).items()


def test_the_pod_is_the_single_instance_one_but_for_the_state(rendered, single):
    """Both overlays take one base: with replicas, strategy, spread, the state volume and the
    backend set aside, the Deployments are the same (security, probes, resources, annotations,
    image, configuration)."""
    def without_state(r: Rendered) -> dict:
        deployment = copy.deepcopy(r.deployment)
        spec = deployment["spec"]
        for key in ("replicas", "strategy"):
            spec.pop(key)
        pod = spec["template"]["spec"]
        pod.pop("topologySpreadConstraints", None)
        pod["volumes"] = [v for v in pod["volumes"] if "persistentVolumeClaim" not in v]
        container = pod["containers"][0]
        state_dir = r.broker_config()["state"]["directory"]
        container["volumeMounts"] = [m for m in container["volumeMounts"] if m["mountPath"] != state_dir]
        container["env"] = sorted((e for e in container["env"] if e["name"] != "BROKER_STATE_BACKEND"),
                                  key=lambda e: e["name"])
        return deployment

    assert without_state(rendered) == without_state(single)
    assert {d["kind"] for d in rendered.docs} - {"PodDisruptionBudget"} == {d["kind"] for d in single.docs} - {"PersistentVolumeClaim"}


def test_the_configuration_passes_check_config_with_the_postgres_backend(rendered, tmp_path):
    binary = broker_binary()
    text = rendered.one("ConfigMap")["data"]["broker.yaml"]
    path = tmp_path / "broker.yaml"
    path.write_text(text)
    env = placeholder_secret_env(yaml.safe_load(text), gen_key(binary))
    env.update(BROKER_STATE_BACKEND="postgres", BROKER_POSTGRES_URL="postgres://broker@db.internal:5432/broker?sslmode=verify-full",
               BROKER_POSTGRES_PASSWORD="placeholder")
    result = run([binary, "check-config", path], env=clean_env(env), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    env.pop("BROKER_POSTGRES_URL")
    refused = run([binary, "check-config", path], env=clean_env(env), cwd=tmp_path)
    assert refused.returncode != 0 and "state.postgres.url" in refused.stdout + refused.stderr
