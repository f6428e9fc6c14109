"""(e) deploy/kubernetes: both overlays (deploy/kubernetes, one broker on a volume, and
deploy/kubernetes/several-instances, on PostgreSQL) rendered by the real `kubectl kustomize`,
every rendered resource validated against the Kubernetes API schema (strict: unknown fields are
errors), and the Deployment checked for what running the broker safely needs: security
contexts, probes, volumes, secrets, Service, NetworkPolicy, and a ConfigMap whose name changes
with the configuration. The single-instance specifics are here too; several-instances' in
test_deploy_kubernetes_several.py."""

from __future__ import annotations

import copy
import re
import shutil
from pathlib import Path

import pytest
from kubernetes_validate import utils as kv

from deploy_support import (
    KUBERNETES, KUBERNETES_BASE, KUBERNETES_SEVERAL, Dockerfile, Rendered, cmd_config_path,
    config_secrets, kubectl, load_yaml, load_yaml_documents, render,
)

# The newest schema the validator carries, and an older release still in wide use.
VERSIONS = ["1.37.0", "1.30.0"]

OVERLAYS = {"deploy/kubernetes": KUBERNETES, "deploy/kubernetes/several-instances": KUBERNETES_SEVERAL}


@pytest.fixture(scope="module", params=sorted(OVERLAYS))
def overlay(request) -> Rendered:
    return render(OVERLAYS[request.param])


@pytest.fixture(scope="module")
def single() -> Rendered:
    return render(KUBERNETES)


def http_port(rendered: Rendered) -> int:
    return next(p["containerPort"] for p in rendered.container["ports"] if p["name"] == "http")


# --- the layout -----------------------------------------------------------------------------

def test_without_kubectl_the_rendering_checks_say_why_they_did_not_run(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.skip.Exception, match="kubectl is not on PATH"):
        kubectl()


@pytest.mark.parametrize("name", sorted(OVERLAYS))
def test_each_overlay_is_the_base_and_its_own_files(name):
    """An overlay names the base beside it, never a directory that holds the overlay itself (the
    cycle kustomize refuses), and lists every manifest it has."""
    directory = OVERLAYS[name]
    kustomization = load_yaml(directory / "kustomization.yaml")
    assert kustomization["kind"] == "Kustomization"
    directories = [r for r in kustomization["resources"] if (directory / r).is_dir()]
    assert [(directory / r).resolve() for r in directories] == [KUBERNETES_BASE.resolve()]
    for resource in directories:
        assert not directory.resolve().is_relative_to((directory / resource).resolve()), resource
    files = {r for r in kustomization["resources"] if r not in directories}
    assert files == {p.name for p in directory.glob("*.yaml")} - {"kustomization.yaml"}
    assert kustomization["namespace"] == load_yaml(KUBERNETES_BASE / "namespace.yaml")["metadata"]["name"]


def test_the_base_lists_every_manifest_and_generates_the_config_map():
    kustomization = load_yaml(KUBERNETES_BASE / "kustomization.yaml")
    kinds = {doc["kind"] for r in kustomization["resources"] for doc in load_yaml_documents(KUBERNETES_BASE / r)}
    assert "ConfigMap" not in kinds, "the ConfigMap is generated, not written"
    [generator] = kustomization["configMapGenerator"]
    assert generator["files"] == ["broker.yaml"]
    assert set(kustomization["resources"]) == {p.name for p in KUBERNETES_BASE.glob("*.yaml")} - {
        "kustomization.yaml", "broker.yaml"}


# --- every overlay ----------------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
def test_every_rendered_resource_validates_against_the_schema(overlay, version):
    for doc in overlay.docs:
        kv.validate(doc, version, strict=True)


def test_the_validator_rejects_a_misspelt_field(single):
    broken = copy.deepcopy(single.deployment)
    broken["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFileSystem"] = True
    with pytest.raises(kv.ValidationError):
        kv.validate(broken, VERSIONS[0], strict=True)


def test_everything_is_in_the_namespace_and_the_image_is_the_registrys(overlay):
    namespace = overlay.one("Namespace")["metadata"]["name"]
    assert {doc["metadata"].get("namespace") for doc in overlay.docs if doc["kind"] != "Namespace"} == {namespace}
    [image] = load_yaml(KUBERNETES_BASE / "kustomization.yaml")["images"]
    assert overlay.container["image"] == f"{image['newName']}:{image['newTag']}"


def test_security_context(overlay):
    pod = overlay.pod
    uid = int(Dockerfile().runtime.last("USER").value[0].split(":")[0])
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == uid
    assert pod["securityContext"]["fsGroup"] == uid
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    sc = overlay.container["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert overlay.one("Namespace")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_probes_resources_and_termination(overlay):
    c = overlay.container
    assert overlay.env()["BROKER_LISTEN"] == f"0.0.0.0:{http_port(overlay)}"
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert c["startupProbe"]["httpGet"]["path"] == "/healthz"
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(c["resources"][kind])
    server = overlay.broker_config()["server"]
    grace = server.get("shutdown_delay_seconds", 10) + server.get("shutdown_grace_seconds", 10)
    assert overlay.pod["terminationGracePeriodSeconds"] == 45 > grace + 10


def test_volumes_meet_configuration_and_image(overlay):
    c = overlay.container
    volumes = {v["name"]: v for v in overlay.pod["volumes"]}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert {m["name"] for m in mounts.values()} == set(volumes), "every mount has its volume, every volume a mount"
    state_dir = overlay.env()["BROKER_STATE_DIR"]
    assert state_dir == overlay.broker_config()["state"]["directory"] == Dockerfile().runtime.env()["BROKER_STATE_DIR"]
    config_path = Path(cmd_config_path(Dockerfile()))
    assert c["args"] == ["serve", "--config", str(config_path)]
    config_mount = mounts[str(config_path.parent)]
    assert config_mount["readOnly"] is True
    configmap = overlay.one("ConfigMap")
    assert volumes[config_mount["name"]]["configMap"]["name"] == configmap["metadata"]["name"]
    assert config_path.name in configmap["data"]
    assert "/tmp" in mounts, "a writable /tmp under the read-only root file system"


def test_the_config_map_is_generated_from_broker_yaml_and_named_by_its_hash(overlay):
    configmap = overlay.one("ConfigMap")
    name = configmap["metadata"]["name"]
    assert re.fullmatch(r"token-broker-config-[a-z0-9]{10}", name), name
    assert configmap["data"] == {"broker.yaml": (KUBERNETES_BASE / "broker.yaml").read_text()}
    assert [v["configMap"]["name"] for v in overlay.pod["volumes"] if "configMap" in v] == [name]


@pytest.mark.parametrize("name", sorted(OVERLAYS))
def test_a_configuration_change_rolls_the_pods(name, tmp_path):
    """Another broker.yaml, another ConfigMap name, another pod template: `kubectl apply -k`
    rolls the pods with nothing else changed."""
    copy_root = tmp_path / "kubernetes"
    shutil.copytree(KUBERNETES, copy_root)
    directory = copy_root / OVERLAYS[name].relative_to(KUBERNETES)
    before = render(directory)
    config = copy_root / "base" / "broker.yaml"
    config.write_text(config.read_text().replace("level: info", "level: debug"))
    after = render(directory)
    assert after.broker_config()["log"]["level"] == "debug"
    old, new = (r.one("ConfigMap")["metadata"]["name"] for r in (before, after))
    assert old != new
    assert after.deployment["spec"]["template"] != before.deployment["spec"]["template"]
    assert [v["configMap"]["name"] for v in after.pod["volumes"] if "configMap" in v] == [new]


def test_secret_holds_every_secret_the_configuration_names(overlay):
    secret = overlay.one("Secret")
    assert [ref["secretRef"]["name"] for ref in overlay.container["envFrom"]] == [secret["metadata"]["name"]]
    secrets = config_secrets(overlay.broker_config())
    assert not secrets.files
    assert secrets.env == set(secret["stringData"])
    assert all(value.startswith("REPLACE_") for value in secret["stringData"].values()), "placeholders only"


def test_service_reaches_the_pod(overlay):
    service = overlay.one("Service")
    labels = overlay.deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert overlay.deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http"]


def test_the_network_policy_admits_the_http_port_only(overlay):
    """Ingress to the http port, and to nothing else (an admin listener of its own stays inside
    the pod); egress open."""
    policy = overlay.one("NetworkPolicy")["spec"]
    labels = overlay.deployment["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"] and policy["podSelector"]["matchLabels"].items() <= labels.items()
    assert policy["policyTypes"] == ["Ingress"], "egress stays open: providers listen on many hosts and ports"
    assert policy["ingress"], "no rule would admit nothing, not even the Ingress controller"
    for rule in policy["ingress"]:
        # A rule without ports admits every port.
        assert rule.get("ports") == [{"port": http_port(overlay), "protocol": "TCP"}], rule


# --- deploy/kubernetes: one broker ----------------------------------------------------------------

def test_single_replica_recreated_on_update(single):
    spec = single.deployment["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}
    claim = single.one("PersistentVolumeClaim")
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert single.env().get("BROKER_STATE_BACKEND", "embedded") == "embedded"


def test_the_state_directory_is_the_claimed_volume(single):
    volumes = {v["name"]: v for v in single.pod["volumes"]}
    mounts = {m["mountPath"]: m for m in single.container["volumeMounts"]}
    state_dir = single.broker_config()["state"]["directory"]
    mount = mounts[state_dir]
    assert not mount.get("readOnly")
    claim = single.one("PersistentVolumeClaim")["metadata"]["name"]
    assert volumes[mount["name"]]["persistentVolumeClaim"] == {"claimName": claim}
