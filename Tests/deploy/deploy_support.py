"""Helpers of the packaging checks: the repository's paths, the broker binary, the Dockerfile
as BuildKit parses it, broker configurations and their secrets, the Kubernetes manifests as
`kubectl kustomize` renders them, and Debian's package data."""

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


# --- Debian packages ---------------------------------------------------------------------------

@dataclass
class Package:
    name: str
    priority: str
    essential: bool
    depends: list[list[str]]   # groups of alternatives
    provides: list[str]


def _names(field_text: str) -> list[list[str]]:
    groups = []
    for group in field_text.split(","):
        alternatives = []
        for alternative in group.split("|"):
            name = re.sub(r"\(.*?\)|\[.*?\]|<.*?>", "", alternative).strip().split(":")[0]
            if name:
                alternatives.append(name)
        if alternatives:
            groups.append(alternatives)
    return groups


def installed_packages() -> dict[str, Package]:
    out = run(["dpkg-query", "-W", "-f",
               "${Package}\t${Essential}\t${Priority}\t${Pre-Depends}\t${Depends}\t${Provides}\t${db:Status-Status}\n"])
    assert out.returncode == 0, out.stderr
    packages: dict[str, Package] = {}
    for line in out.stdout.splitlines():
        name, essential, priority, pre, depends, provides, status = (line.split("\t") + [""] * 7)[:7]
        if status != "installed":
            continue
        package = packages.setdefault(name, Package(name, priority, essential == "yes", [], []))
        package.depends += _names(pre) + _names(depends)
        package.provides += [alt[0] for alt in _names(provides)]
    return packages


def dependency_closure(roots: set[str], packages: dict[str, Package]) -> set[str]:
    """The packages apt installs for `roots`, as far as this machine's dpkg database tells:
    of each group of alternatives, the first one installed here (by name or as a provider)."""
    providers: dict[str, str] = {}
    for package in packages.values():
        for virtual in package.provides:
            providers.setdefault(virtual, package.name)
    seen: set[str] = set()
    todo = [r for r in roots]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        package = packages.get(name)
        if package is None:
            continue
        for group in package.depends:
            chosen = next((a for a in group if a in packages), None) or next(
                (providers[a] for a in group if a in providers), None)
            if chosen and chosen not in seen:
                todo.append(chosen)
    return seen


def base_image_packages(packages: dict[str, Package]) -> set[str]:
    """What debian:bookworm-slim holds: the Essential and Priority: required packages."""
    roots = {p.name for p in packages.values() if p.essential or p.priority == "required"}
    return dependency_closure(roots, packages)


def packages_owning(paths: list[str]) -> dict[str, str]:
    """path -> Debian package, looking through the /lib -> /usr/lib merge and symlinks."""
    candidates: dict[str, list[str]] = {}
    for path in paths:
        variants = {path, os.path.realpath(path)}
        for variant in list(variants):
            if variant.startswith("/lib"):
                variants.add("/usr" + variant)
            elif variant.startswith("/usr/lib"):
                variants.add(variant[len("/usr"):])
        candidates[path] = sorted(variants)
    queries = sorted({v for vs in candidates.values() for v in vs})
    out = run(["dpkg-query", "-S", *queries])
    owner_of: dict[str, str] = {}
    for line in out.stdout.splitlines():
        owners, _, owned = line.rpartition(": ")
        if owners and not owners.startswith("diversion"):
            owner_of[owned] = owners.split(",")[0].strip().split(":")[0]
    return {path: next((owner_of[v] for v in vs if v in owner_of), "") for path, vs in candidates.items()}


def ldd(binary: Path) -> list[str]:
    """The absolute paths of the shared libraries the binary loads."""
    out = run(["ldd", binary])
    assert out.returncode == 0, out.stdout + out.stderr
    libraries = []
    for line in out.stdout.splitlines():
        assert "not found" not in line, line
        match = re.search(r"(/\S+)\s+\(0x", line)
        if match:
            libraries.append(match.group(1))
    return libraries


def swift_static_link_libraries() -> list[str]:
    """The system libraries `--static-swift-stdlib` links against (the toolchain's
    static-stdlib-args.lnk), as paths found by ldconfig; empty if no toolchain is found."""
    swift = shutil.which("swift") or "/opt/swift/usr/bin/swift"
    lnk = Path(os.path.realpath(swift)).parent.parent / "lib" / "swift_static" / "linux" / "static-stdlib-args.lnk"
    if not lnk.exists():
        return []
    names = re.findall(r"(?:^|\s)-l(\S+)", lnk.read_text())
    cache = run(["ldconfig", "-p"]).stdout
    paths = []
    for name in names:
        if name.startswith("swift") or name in ("dispatch", "BlocksRuntime"):
            continue  # the Swift runtime itself, linked statically
        match = re.search(rf"^\s*lib{re.escape(name)}\.so(?:\.\d+)* \(libc6,x86-64[^)]*\) => (\S+)", cache, re.M) \
            or re.search(rf"^\s*lib{re.escape(name)}\.so(?:\.\d+)* \([^)]*\) => (\S+)", cache, re.M)
        assert match, f"-l{name} of {lnk}: no such library in the ldconfig cache"
        paths.append(match.group(1))
    return paths


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
