"""The binary names the commit it was built from: `token-broker version`, the `listening` line
and `broker_build_info{version,commit}` agree, and under `make` (which exports BROKER_COMMIT
from git) it is that commit. The Dockerfile and Compose pass it as a build argument."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import urllib.request

from deploy_support import REPO, broker_binary, clean_env, run


def test_the_version_the_log_and_the_metrics_name_one_commit(tmp_path):
    binary = broker_binary()
    version = run([binary, "version"])
    match = re.fullmatch(r"token-broker (\S+) \(commit (\S+)\)\n", version.stdout)
    assert version.returncode == 0 and match, version.stdout + version.stderr
    number, commit = match.groups()
    if os.environ.get("BROKER_COMMIT"):
        assert commit == os.environ["BROKER_COMMIT"], "make exports BROKER_COMMIT from git for every build"
    broker = subprocess.Popen([str(binary), "serve", "--dev", "--listen", "127.0.0.1:0"], cwd=tmp_path,
                              env=clean_env({"BROKER_LOG_FORMAT": "json"}), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        listening = next(entry for entry in map(json.loads, broker.stdout) if entry["msg"] == "listening")
        assert (listening["version"], listening["commit"]) == (number, commit)
        with urllib.request.urlopen(f"http://{listening['address']}/metrics", timeout=10) as answer:
            metrics = answer.read().decode()
        assert f'broker_build_info{{version="{number}",commit="{commit}"}} 1' in metrics, \
            [line for line in metrics.splitlines() if "build_info" in line]
    finally:
        broker.send_signal(signal.SIGINT)
        broker.wait(30)


def test_the_image_and_compose_pass_the_commit_to_the_build():
    dockerfile = (REPO / "Dockerfile").read_text()
    build = dockerfile.index("RUN swift build -c release")
    assert 0 <= dockerfile.index("ARG BROKER_COMMIT=") < build, "the ARG is in the build stage, before the build"
    for compose in ("docker-compose.yml", "docker-compose.several-instances.yml"):
        assert "BROKER_COMMIT: ${BROKER_COMMIT:-}" in (REPO / "deploy" / compose).read_text(), compose
