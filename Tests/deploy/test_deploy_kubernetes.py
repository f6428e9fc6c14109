"""(e) deploy/kubernetes: every manifest validates against the Kubernetes API schema (strict:
unknown fields are errors), and the Deployment has what running the broker safely needs."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from kubernetes_validate import utils as kv

from deploy_support import (
    KUBERNETES, Dockerfile, cmd_config_path, config_secrets, load_yaml, load_yaml_documents,
)

# The newest schema the validator carries, and an older release still in wide use.
VERSIONS = ["1.37.0", "1.30.0"]


def manifests() -> dict[str, list[dict]]:
    return {path.name: load_yaml_documents(path) for path in sorted(KUBERNETES.glob("*.yaml"))
            if path.name != "kustomization.yaml"}


def resources() -> list[dict]:
    return [doc for docs in manifests().values() for doc in docs]


def one(kind: str) -> dict:
    found = [doc for doc in resources() if doc["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind}s"
    return found[0]


def deployment() -> dict:
    return one("Deployment")


def container() -> dict:
    containers = deployment()["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def broker_config() -> dict:
    return yaml.safe_load(one("ConfigMap")["data"]["broker.yaml"])


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", sorted(manifests()))
def test_manifest_validates_against_the_schema(name, version):
    for doc in manifests()[name]:
        kv.validate(doc, version, strict=True)


def test_the_validator_rejects_a_misspelt_field():
    broken = copy.deepcopy(deployment())
    broken["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFileSystem"] = True
    with pytest.raises(kv.ValidationError):
        kv.validate(broken, VERSIONS[0], strict=True)


def test_kustomization_lists_every_manifest():
    kustomization = load_yaml(KUBERNETES / "kustomization.yaml")
    assert kustomization["kind"] == "Kustomization"
    assert sorted(kustomization["resources"]) == sorted(manifests())
    namespace = one("Namespace")["metadata"]["name"]
    assert kustomization["namespace"] == namespace
    assert [image["name"] for image in kustomization["images"]] == [container()["image"]]


def test_single_replica_recreated_on_update():
    spec = deployment()["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}
    claim = one("PersistentVolumeClaim")
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_security_context():
    pod = deployment()["spec"]["template"]["spec"]
    uid = int(Dockerfile().runtime.last("USER").value[0].split(":")[0])
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == uid
    assert pod["securityContext"]["fsGroup"] == uid
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    sc = container()["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert one("Namespace")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_probes_resources_and_termination():
    c = container()
    port = next(p for p in c["ports"] if p["name"] == "http")
    listen = next(e["value"] for e in c["env"] if e["name"] == "BROKER_LISTEN")
    assert listen == f"0.0.0.0:{port['containerPort']}"
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert c["startupProbe"]["httpGet"]["path"] == "/healthz"
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(c["resources"][kind])
    server = broker_config()["server"]
    grace = server.get("shutdown_delay_seconds", 10) + server.get("shutdown_grace_seconds", 10)
    assert deployment()["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 45 > grace + 10


def test_volumes_meet_configuration_and_image():
    c = container()
    pod = deployment()["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    env = {e["name"]: e.get("value") for e in c["env"]}
    state_dir = env["BROKER_STATE_DIR"]
    assert state_dir == broker_config()["state"]["directory"] == Dockerfile().runtime.env()["BROKER_STATE_DIR"]
    state = volumes[mounts[state_dir]["name"]]
    assert state["persistentVolumeClaim"]["claimName"] == one("PersistentVolumeClaim")["metadata"]["name"]
    config_path = Path(cmd_config_path(Dockerfile()))
    assert c["args"] == ["serve", "--config", str(config_path)]
    config_mount = mounts[str(config_path.parent)]
    assert config_mount["readOnly"] is True
    assert volumes[config_mount["name"]]["configMap"]["name"] == one("ConfigMap")["metadata"]["name"]
    assert config_path.name in one("ConfigMap")["data"]
    assert "/tmp" in mounts, "a writable /tmp under the read-only root file system"


def test_secret_holds_every_secret_the_configuration_names():
    secret = one("Secret")
    assert [ref["secretRef"]["name"] for ref in container()["envFrom"]] == [secret["metadata"]["name"]]
    secrets = config_secrets(broker_config())
    assert not secrets.files
    assert secrets.env == set(secret["stringData"])
    assert all(value.startswith("REPLACE_") for value in secret["stringData"].values()), "placeholders only"


def test_service_reaches_the_pod():
    service = one("Service")
    labels = deployment()["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert deployment()["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http"]
