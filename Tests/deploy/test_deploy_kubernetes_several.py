"""deploy/kubernetes/several-instances: the base with its patches applied as kustomize applies
them (a `$patch: delete` and JSON 6902 operations; no kustomize binary needed), then validated
against the Kubernetes schemas, and checked for what several brokers on PostgreSQL need: three
replicas, rolling updates that keep three ready, a PodDisruptionBudget, no volume, the postgres
backend, and a configuration that passes check-config for it."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from kubernetes_validate import utils as kv

from deploy_support import KUBERNETES, broker_binary, clean_env, gen_key, load_yaml, load_yaml_documents, placeholder_secret_env, run

OVERLAY = KUBERNETES / "several-instances"
VERSIONS = ["1.37.0", "1.30.0"]


def documents(directory: Path) -> list[dict]:
    """What `kubectl kustomize directory` would produce, for the features these files use."""
    kustomization = load_yaml(directory / "kustomization.yaml")
    docs: list[dict] = []
    for resource in kustomization.get("resources", []):
        path = directory / resource
        docs += documents(path) if path.is_dir() else load_yaml_documents(path)
    for patch in kustomization.get("patches", []):
        target = patch["target"]
        matches = [d for d in docs if d["kind"] == target["kind"] and d["metadata"]["name"] == target["name"]]
        assert len(matches) == 1, f"the patch target {target} matches {len(matches)} resources"
        body = yaml.safe_load(patch["patch"])
        if isinstance(body, dict):
            assert body.get("$patch") == "delete", "only deleting strategic-merge patches are used"
            docs.remove(matches[0])
        else:
            apply_json6902(matches[0], body)
    return docs


def apply_json6902(doc: dict, operations: list[dict]) -> None:
    for operation in operations:
        *parents, last = operation["path"].strip("/").split("/")
        node = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if operation["op"] == "remove":
            assert (int(last) < len(node)) if isinstance(node, list) else last in node, operation["path"]
            del node[int(last) if isinstance(node, list) else last]
        elif operation["op"] == "replace":
            assert (int(last) < len(node)) if isinstance(node, list) else last in node, operation["path"]
            node[int(last) if isinstance(node, list) else last] = copy.deepcopy(operation["value"])
        elif operation["op"] == "add":
            if isinstance(node, list):
                node.append(copy.deepcopy(operation["value"])) if last == "-" else node.insert(int(last), copy.deepcopy(operation["value"]))
            else:
                node[last] = copy.deepcopy(operation["value"])
        else:
            raise AssertionError(f"unsupported operation {operation['op']}")


@pytest.fixture(scope="module")
def rendered() -> list[dict]:
    return documents(OVERLAY)


def one(docs: list[dict], kind: str) -> dict:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind}s"
    return found[0]


@pytest.mark.parametrize("version", VERSIONS)
def test_every_rendered_resource_validates(rendered, version):
    for doc in rendered:
        kv.validate(doc, version, strict=True)


def test_three_replicas_roll_without_losing_one_and_no_volume_remains(rendered):
    assert not [d for d in rendered if d["kind"] == "PersistentVolumeClaim"]
    deployment = one(rendered, "Deployment")["spec"]
    assert deployment["replicas"] == 3
    assert deployment["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    pod = deployment["template"]["spec"]
    assert not [v for v in pod["volumes"] if "persistentVolumeClaim" in v]
    names = {v["name"] for v in pod["volumes"]}
    container = pod["containers"][0]
    assert {m["name"] for m in container["volumeMounts"]} <= names, "every mount has its volume"
    assert {"name": "BROKER_STATE_BACKEND", "value": "postgres"} in container["env"]


def test_the_disruption_budget_covers_the_broker_pods(rendered):
    budget = one(rendered, "PodDisruptionBudget")["spec"]
    labels = one(rendered, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert budget["maxUnavailable"] == 1
    assert budget["selector"]["matchLabels"].items() <= labels.items()


def test_the_configuration_passes_check_config_with_the_postgres_backend(rendered, tmp_path):
    binary = broker_binary()
    text = one(rendered, "ConfigMap")["data"]["broker.yaml"]
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
