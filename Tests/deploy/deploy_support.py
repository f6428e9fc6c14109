"""Helpers of the packaging checks: the repository's paths, the broker binary, the Dockerfile
as BuildKit parses it, broker configurations and their secrets, the Kubernetes manifests as
`kubectl kustomize` renders them, and systemd's unit files (Debian's package data:
debian_packages.py)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
KUBERNETES = DEPLOY / "kubernetes"            # the single-instance overlay
KUBERNETES_BASE = KUBERNETES / "base"
KUBERNETES_SEVERAL = KUBERNETES / "several-instances"
SYSTEMD = DEPLOY / "systemd"
DOCKERFILE = REPO / "Dockerfile"
VENV_BIN = Path(sys.executable).parent


def broker_binary() -> Path:
    """`$TOKEN_BROKER_BINARY`, else the debug build."""
    return Path(os.environ.get("TOKEN_BROKER_BINARY") or REPO / ".build" / "debug" / "token-broker")


def venv_tool(name: str) -> Path:
    """A command-line tool that Tests/deploy/requirements.txt installs beside this Python."""
    path = VENV_BIN / name
    if not path.exists():
        found = shutil.which(name)
        if found is None:
            raise AssertionError(f"{name} is missing: pip install -r Tests/deploy/requirements.txt")
        path = Path(found)
    return path


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """A minimal environment, so that the machine's own BROKER_* variables cannot leak in."""
    env = {key: os.environ[key] for key in ("PATH", "HOME", "LANG", "TZ") if key in os.environ}
    env.update(extra or {})
    return env


def run(args: list[str | os.PathLike[str]], *, env: dict[str, str] | None = None,
        cwd: os.PathLike[str] | str | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], env=env if env is not None else clean_env(), cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def gen_key(binary: Path) -> str:
    result = run([binary, "gen-key"])
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


# --- broker configurations -------------------------------------------------------------------

def load_yaml(path: Path):
    return yaml.safe_load(path.read_text())


def load_yaml_documents(path: Path) -> list:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


@dataclass
class Secrets:
    """Where a broker configuration takes its secrets from."""
    env: set[str] = field(default_factory=set)     # variables: client_secret_env, state.key_env
    files: set[str] = field(default_factory=set)   # paths as written: client_secret_file, state.key_file
    key_env: str | None = None
    key_file: str | None = None


def config_secrets(config: dict) -> Secrets:
    secrets = Secrets()
    for provider in (config.get("providers") or {}).values():
        if "client_secret_env" in provider:
            secrets.env.add(provider["client_secret_env"])
        if "client_secret_file" in provider:
            secrets.files.add(provider["client_secret_file"])
    state = config.get("state") or {}
    if "key_file" in state:
        secrets.key_file = state["key_file"]
        secrets.files.add(state["key_file"])
    else:
        secrets.key_env = state.get("key_env", "BROKER_STATE_KEY")
        secrets.env.add(secrets.key_env)
    return secrets


def placeholder_secret_env(config: dict, state_key: str) -> dict[str, str]:
    """Placeholder values for every variable the configuration takes a secret from."""
    secrets = config_secrets(config)
    env = {name: f"placeholder-{name.lower()}" for name in secrets.env}
    if secrets.key_env:
        env[secrets.key_env] = state_key
    return env


# --- Kubernetes ---------------------------------------------------------------------------------

def kubectl() -> Path:
    """kubectl, whose `kustomize` renders deploy/kubernetes as `kubectl apply -k` applies it. Where
    it is not installed (Debian packages none: https://kubernetes.io/docs/tasks/tools/), the
    checks that render are skipped, saying so: no re-implementation of kustomize stands in."""
    found = shutil.which("kubectl")
    if found is None:
        import pytest
        pytest.skip("kubectl is not on PATH: the Kubernetes checks render deploy/kubernetes with `kubectl kustomize` "
                    "(no cluster needed); install it to run them: https://kubernetes.io/docs/tasks/tools/")
    return Path(found)


def kustomize(directory: Path) -> list[dict]:
    """The resources `kubectl kustomize directory` renders: what `kubectl apply -k` would apply."""
    result = run([kubectl(), "kustomize", directory], timeout=60)
    assert result.returncode == 0, f"kubectl kustomize {directory} failed:\n{result.stderr}"
    docs = [doc for doc in yaml.safe_load_all(result.stdout) if doc is not None]
    assert docs, f"kubectl kustomize {directory} rendered nothing"
    return docs


@dataclass
class Rendered:
    """One overlay's resources, as kubectl kustomize renders them."""
    directory: Path
    docs: list[dict]

    def all(self, kind: str) -> list[dict]:
        return [doc for doc in self.docs if doc["kind"] == kind]

    def one(self, kind: str) -> dict:
        found = self.all(kind)
        assert len(found) == 1, f"{self.directory}: {len(found)} {kind}s"
        return found[0]

    @property
    def deployment(self) -> dict:
        return self.one("Deployment")

    @property
    def pod(self) -> dict:
        return self.deployment["spec"]["template"]["spec"]

    @property
    def container(self) -> dict:
        containers = self.pod["containers"]
        assert len(containers) == 1
        return containers[0]

    def env(self) -> dict[str, str | None]:
        names = [e["name"] for e in self.container["env"]]
        assert len(names) == len(set(names)), f"a variable set twice: {names}"
        return {e["name"]: e.get("value") for e in self.container["env"]}

    def broker_config(self) -> dict:
        return yaml.safe_load(self.one("ConfigMap")["data"]["broker.yaml"])


def render(directory: Path) -> Rendered:
    return Rendered(directory, kustomize(directory))


# --- the Dockerfile ----------------------------------------------------------------------------

@dataclass
class Stage:
    name: str
    base: str
    instructions: list = field(default_factory=list)

    def all(self, cmd: str) -> list:
        return [i for i in self.instructions if i.cmd == cmd]

    def last(self, cmd: str):
        found = self.all(cmd)
        return found[-1] if found else None

    def run_text(self) -> str:
        return "\n".join(" ".join(i.value) for i in self.all("RUN"))

    def apt_installs(self) -> list[str]:
        """The packages of every `apt-get install` in the stage's RUN instructions."""
        packages: list[str] = []
        for instruction in self.all("RUN"):
            for command in re.split(r"&&|;|\|\|", " ".join(instruction.value)):
                words = shlex.split(command)
                while words and "=" in words[0]:          # VAR=value prefixes
                    words.pop(0)
                if words[:1] == ["apt-get"] and "install" in words:
                    after = words[words.index("install") + 1:]
                    packages += [w for w in after if not w.startswith("-")]
        return packages

    def env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        for instruction in self.all("ENV"):
            values = list(instruction.value)
            env.update(zip(values[0::2], values[1::2]))
        return env


class Dockerfile:
    def __init__(self, path: Path = DOCKERFILE):
        import dockerfile  # BuildKit's parser

        self.path = path
        self.commands = list(dockerfile.parse_file(str(path)))
        self.args: dict[str, str] = {}
        self.stages: list[Stage] = []
        for command in self.commands:
            if command.cmd == "FROM":
                words = list(command.value)
                base = self._expand(words[0])
                name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else str(len(self.stages))
                self.stages.append(Stage(name=name, base=base))
            elif not self.stages and command.cmd == "ARG":
                key, _, default = command.value[0].partition("=")
                self.args[key] = default
            elif self.stages:
                self.stages[-1].instructions.append(command)

    def _expand(self, text: str) -> str:
        return re.sub(r"\$\{?(\w+)\}?", lambda m: self.args.get(m.group(1), m.group(0)), text)

    @property
    def runtime(self) -> Stage:
        return self.stages[-1]

    def stage(self, name: str) -> Stage:
        return next(s for s in self.stages if s.name == name)


def exec_form(instruction) -> list[str]:
    assert instruction is not None
    assert instruction.json, f"{instruction.original}: use the exec (JSON) form"
    return list(instruction.value)


def cmd_config_path(df: Dockerfile) -> str:
    command = exec_form(df.runtime.last("CMD"))
    return command[command.index("--config") + 1]


# --- systemd -----------------------------------------------------------------------------------

def parse_unit(path: Path) -> dict[str, list[tuple[str, str]]]:
    """A unit file as section -> [(key, value)] (keys repeat, as in systemd)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = None
    pending = ""
    for raw in path.read_text().splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
            sections.setdefault(current, [])
            continue
        assert current is not None, f"{path}: {line!r} outside a section"
        key, sep, value = line.partition("=")
        assert sep, f"{path}: {line!r} is not KEY=VALUE"
        sections[current].append((key.strip(), value.strip()))
    return sections


def unit_values(unit: dict[str, list[tuple[str, str]]], section: str, key: str) -> list[str]:
    return [v for k, v in unit.get(section, []) if k == key]
