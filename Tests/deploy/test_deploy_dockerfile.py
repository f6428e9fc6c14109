"""The Dockerfile, checked without a Docker engine: BuildKit's parser and hadolint read it; the
libraries the built binary links are all in the runtime stage; what it copies exists; its
entrypoint, command, environment and health check work with the real binary."""

from __future__ import annotations

import fnmatch
import json
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from debian_packages import (
    base_image_packages, dependency_closure, installed_packages, ldd, packages_owning, swift_static_link_libraries,
)
from deploy_support import (
    DEPLOY, DOCKERFILE, REPO, Dockerfile, broker_binary, clean_env, cmd_config_path, exec_form, gen_key,
    load_yaml, placeholder_secret_env, run, venv_tool,
)

STATE_DIR = "/var/lib/token-broker"
UID = "10001"


@pytest.fixture(scope="module")
def df() -> Dockerfile:
    return Dockerfile()


@pytest.fixture(scope="module")
def binary() -> Path:
    path = broker_binary()
    assert path.exists(), f"{path}: build it first (swift build), or set TOKEN_BROKER_BINARY"
    return path


def test_hadolint_finds_nothing():
    result = run([venv_tool("hadolint"), "--no-color", DOCKERFILE])
    assert result.returncode == 0, result.stdout + result.stderr


def test_two_stages_swift_image_then_debian_slim(df):
    assert [s.name for s in df.stages] == ["build", "runtime"]
    build, runtime = df.stages
    assert "SWIFT_IMAGE" in df.args, "name the Swift image by an ARG"
    assert re.fullmatch(r"swift:6\.\d+(\.\d+)?-bookworm", build.base), build.base
    assert runtime.base == "debian:bookworm-slim", "build and run on the same Debian release"
    assert {"libmicrohttpd-dev", "libssl-dev", "pkg-config"} <= set(build.apt_installs())
    assert re.search(r"swift build -c release --product token-broker --static-swift-stdlib -Xlinker -lcurl", build.run_text())


def test_runtime_stage_installs_no_build_tools(df):
    installed = df.runtime.apt_installs()
    assert {"libmicrohttpd12", "libgnutls30", "libcurl4", "libssl3", "libpq5", "ca-certificates"} <= set(installed)
    assert not [p for p in installed if p.endswith("-dev") or p in ("build-essential", "gcc", "swiftlang")]
    assert "--no-install-recommends" in df.runtime.run_text()
    assert "rm -rf /var/lib/apt/lists/*" in df.runtime.run_text()


def test_runtime_contract(df):
    runtime = df.runtime
    assert runtime.env() == {
        "BROKER_LISTEN": "0.0.0.0:8080", "BROKER_STATE_DIR": STATE_DIR, "BROKER_LOG_FORMAT": "json"}
    assert [v for i in runtime.all("VOLUME") for v in i.value] == [STATE_DIR]
    assert [v for i in runtime.all("EXPOSE") for v in i.value] == ["8080"]
    user = runtime.last("USER").value[0]
    assert user == f"{UID}:{UID}", "a numeric non-root user, so that runAsNonRoot can verify it"
    assert "--uid \"${BROKER_UID}\"" in runtime.run_text() and "ARG BROKER_UID=10001" in DOCKERFILE.read_text()
    assert f"install -d -o token-broker -g token-broker -m 0700 {STATE_DIR}" in runtime.run_text()
    assert runtime.last("STOPSIGNAL").value == ("SIGTERM",)
    assert exec_form(runtime.last("ENTRYPOINT")) == ["token-broker"]
    assert exec_form(runtime.last("CMD")) == ["serve", "--config", "/etc/token-broker/broker.yaml"]
    healthcheck = runtime.last("HEALTHCHECK")
    assert healthcheck is not None and "/healthz" in healthcheck.value[1]
    assert "curl" in runtime.apt_installs(), "the HEALTHCHECK uses curl"


def test_every_linked_library_is_in_the_runtime_stage(df, binary):
    """(a) Every shared library of the binary (ldd) comes from a Debian package that the
    runtime stage installs (with its dependencies) or that debian:bookworm-slim already has;
    Swift runtime libraries must be linked statically or copied from the build stage. The
    system libraries that --static-swift-stdlib links against are checked the same way."""
    packages = installed_packages()
    available = dependency_closure(set(df.runtime.apt_installs()), packages) | base_image_packages(packages)
    static_swift = "--static-swift-stdlib" in df.stage("build").run_text()
    copied_swift = any(i.flags and "--from=build" in i.flags and "/usr/lib/swift/linux" in " ".join(i.value)
                       for i in df.runtime.all("COPY"))
    linked = ldd(binary)
    swift_runtime = [p for p in linked if "/lib/swift/linux/" in p]
    system = [p for p in linked if p not in swift_runtime] + swift_static_link_libraries()
    for name in re.findall(r"-Xlinker -l(\S+)", df.stage("build").run_text()):
        found = [p for p in linked if Path(p).name.startswith(f"lib{name}.so")]
        assert found, f"the build links -l{name}, which the binary does not load"
    assert static_swift or copied_swift or not swift_runtime, \
        f"Swift runtime libraries neither static nor copied: {swift_runtime}"
    owners = packages_owning(system)
    unowned = [p for p, owner in owners.items() if not owner]
    missing = {p: owner for p, owner in owners.items() if owner and owner not in available}
    assert not unowned, f"libraries no Debian package provides: {unowned}"
    assert not missing, f"libraries whose package the runtime stage lacks: {missing}"
    # The mapping found the libraries the README names (libcrypto is libssl3's).
    assert {"libmicrohttpd12", "libgnutls30", "libcurl4", "libssl3", "libpq5", "libc6", "libstdc++6"} <= set(owners.values())


def _dockerignored(path: str, patterns: list[str]) -> bool:
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").strip("/")
        if any(fnmatch.fnmatchcase(prefix, pattern) or fnmatch.fnmatchcase(prefix, pattern.removeprefix("**/"))
               for prefix in prefixes):
            excluded = not negate
    return excluded


def test_every_copied_file_exists_and_reaches_the_build_context(df):
    """(b) Every COPY from the build context names files that exist, are not git-ignored
    (a fresh clone has them) and are not kept out by .dockerignore; every COPY --from names
    a stage, and the build stage produces what the runtime stage takes from it."""
    ignore = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    stage_names = [s.name for s in df.stages]
    checked = 0
    for stage in df.stages:
        for copy in stage.all("COPY") + stage.all("ADD"):
            sources = list(copy.value[:-1])
            source_stage = next((f.split("=", 1)[1] for f in copy.flags if f.startswith("--from=")), None)
            if source_stage is not None:
                assert source_stage in stage_names[:stage_names.index(stage.name)], copy.original
                producer = df.stage(source_stage).run_text()
                for source in sources:
                    assert source in producer, f"{copy.original}: stage {source_stage} never writes {source}"
                continue
            assert copy.cmd == "COPY", f"{copy.original}: use COPY for local files"
            for source in sources:
                matches = list(REPO.glob(source)) if any(c in source for c in "*?[") else [REPO / source]
                assert matches and all(m.exists() for m in matches), f"{copy.original}: {source} does not exist"
                for match in matches:
                    relative = match.relative_to(REPO).as_posix()
                    assert not _dockerignored(relative, ignore), f"{copy.original}: .dockerignore excludes {relative}"
                    ignored = run(["git", "-C", REPO, "check-ignore", "-q", relative])
                    assert ignored.returncode == 1, f"{copy.original}: {relative} is git-ignored"
                checked += 1
    assert checked >= 3


def test_the_build_stage_sources_are_a_package_swiftpm_builds_from(df, tmp_path):
    """(b) What the build stage copies from the context — and nothing .dockerignore keeps out,
    such as Tests/ — is a package SwiftPM resolves and loads: the manifest names no target whose
    folder the image lacks (SwiftPM refuses that even to build one product), and the build's
    product is in it. The image itself cannot be built here; this is its first two steps."""
    ignore = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    build = df.stages[0]
    assert "swift build" in build.run_text()
    copied = [source for copy in build.all("COPY") if not any(f.startswith("--from=") for f in copy.flags) for source in copy.value[:-1]]
    assert "Package.swift" in copied and "Sources" in copied
    for source in copied:
        for path in ([REPO / source] if (REPO / source).is_file() else sorted((REPO / source).rglob("*"))):
            relative = path.relative_to(REPO).as_posix()
            if path.is_file() and not _dockerignored(relative, ignore):
                (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
                (tmp_path / relative).write_bytes(path.read_bytes())
    assert not (tmp_path / "Tests").exists()
    described = run(["swift", "package", "describe", "--type", "json"], cwd=tmp_path, timeout=600)
    assert described.returncode == 0, described.stderr[-2000:]
    products = [product["name"] for product in json.loads(described.stdout[described.stdout.index("{"):])["products"]]
    assert "token-broker" in products


def test_dockerignore_keeps_build_folders_out():
    ignore = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    for path in (".build/debug/token-broker", ".build-pkg/x", ".venv/bin/python", ".git/HEAD"):
        assert _dockerignored(path, ignore), path
    for path in ("Package.swift", "Sources/token-broker/main.swift", "deploy/broker.yaml"):
        assert not _dockerignored(path, ignore), path


def test_entrypoint_and_command_flags_exist(df, binary):
    """(c) ENTRYPOINT + CMD name a subcommand and flags the binary has, and the configuration
    file the CMD names is the one the image ships: deploy/broker.yaml."""
    command = exec_form(df.runtime.last("CMD"))
    top = run([binary, "--help"])
    assert top.returncode == 0
    assert re.search(rf"^\s+{command[0]}\b", top.stdout, re.M), f"no subcommand {command[0]}"
    help_text = run([binary, command[0], "--help"])
    assert help_text.returncode == 0, help_text.stderr
    for flag in [word for word in command[1:] if word.startswith("-")]:
        assert re.search(rf"(^|\s|\[){re.escape(flag)}\b", help_text.stdout), f"serve has no {flag}"
    config_path = cmd_config_path(df)
    shipped = [copy.value for copy in df.runtime.all("COPY") if not copy.flags and copy.value[-1] == config_path]
    assert shipped == [("deploy/broker.yaml", config_path)]


def _image_env(df, binary, extra: dict[str, str]) -> dict[str, str]:
    config = load_yaml(DEPLOY / "broker.yaml")
    env = clean_env(df.runtime.env())
    env.update(placeholder_secret_env(config, gen_key(binary)))
    env.update(extra)
    return env


def test_shipped_config_passes_check_config_in_the_image_environment(df, binary, tmp_path):
    """(c) With the image's ENV and placeholder secrets, the CMD's configuration is valid."""
    result = run([binary, "check-config", DEPLOY / "broker.yaml"], env=_image_env(df, binary, {}), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "listen 0.0.0.0:8080" in result.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _self_signed(directory) -> dict[str, str]:
    """A throwaway certificate for 127.0.0.1, as the broker's TLS settings."""
    certificate, key = directory / "tls.crt", directory / "tls.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-keyout", str(key), "-out", str(certificate)], check=True, capture_output=True, timeout=60)
    return {"BROKER_TLS_CERTIFICATE_FILE": str(certificate), "BROKER_TLS_KEY_FILE": str(key)}


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_image_command_runs_answers_the_healthcheck_and_stops_on_sigterm(df, binary, tmp_path, tls):
    """The ENTRYPOINT + CMD as the container would run them (only the listen address moved to a
    free loopback port and the state directory to a temporary one), serving plain HTTP or, with
    server.tls_*, HTTPS: the HEALTHCHECK command succeeds, the STOPSIGNAL stops the broker
    cleanly after the shutdown delay and well within the grace period, and a snapshot is left in
    the state directory."""
    port = _free_port()
    state = tmp_path / "state"
    env = _image_env(df, binary, {"BROKER_LISTEN": f"127.0.0.1:{port}", "BROKER_STATE_DIR": str(state),
                                  **(_self_signed(tmp_path) if tls else {})})
    command = [str(binary)] + exec_form(df.runtime.last("CMD"))
    command[command.index("--config") + 1] = str(DEPLOY / "broker.yaml")
    healthcheck = df.runtime.last("HEALTHCHECK").value[1]
    process = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 15
        while True:
            probe = subprocess.run(["/bin/sh", "-c", healthcheck], env=env, capture_output=True, text=True, timeout=10)
            if probe.returncode == 0 or time.monotonic() > deadline or process.poll() is not None:
                break
            time.sleep(0.2)
        assert probe.returncode == 0, probe.stderr
        stopsignal = getattr(signal, df.runtime.last("STOPSIGNAL").value[0])
        started = time.monotonic()
        process.send_signal(stopsignal)
        delay = load_yaml(DEPLOY / "broker.yaml")["server"]["shutdown_delay_seconds"]
        out, err = process.communicate(timeout=delay + 20)
        assert process.returncode == 0, err
        assert delay <= time.monotonic() - started < delay + 10
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert (state / "snapshot.tbs").exists()
    assert '"msg":"stopped"' in out, "JSON logs (BROKER_LOG_FORMAT=json) on standard output"
