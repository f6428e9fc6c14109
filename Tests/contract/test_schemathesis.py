"""Contract fuzzing: schemathesis against the live broker, with openapi.yaml as the oracle.

The test starts the real `token-broker` (TOKEN_BROKER_BINARY, or .build/debug/token-broker) in
development mode on a loopback port it picks itself, signs in as the README's walk-through does,
and runs the schemathesis CLI (pinned in requirements.txt) four times, each derandomized
(`--generation-deterministic`: the same requests every run) and bounded in count (`--max-examples`
per operation and phase) and in time (a subprocess deadline; responses over MAX_RESPONSE_TIME fail):

  session    `Authorization: Bearer <live session token>`, every operation but POST /revoke
  forged     a well-formed `tbs_` token that names no session, every operation, Accept: JSON
  anonymous  no Authorization header (schemathesis generates malformed ones too), every
             operation, Accept: text/html like a browser
  revoke     POST /revoke alone, each test case with a fresh live session (schemathesis_hooks.py)

Every check schemathesis has is on (schemathesis.toml names them all); positive_data_acceptance
is off only for the four operations whose valid input depends on server state, and the file says
why. A failure of any check fails the test, with schemathesis' report. The broker must also never
answer a 5xx, log an error, or die, and must stop cleanly (exit 0) at the end.

Run: .venv/bin/python -m pytest -q -s Tests/contract/test_schemathesis.py
"""
from __future__ import annotations

import base64
import collections
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import contract_broker  # noqa: E402
import dev_flow  # noqa: E402
from contract_broker import access_log  # noqa: E402

ROOT = HERE.parents[1]
OPENAPI = ROOT / "openapi.yaml"
CONFIG = HERE / "schemathesis.toml"
SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"

# Bounds. MAX_EXAMPLES is per operation and per phase (coverage adds its own boundary cases).
MIN_REQUESTS = 1000
MAX_RESPONSE_TIME = 10  # seconds; the slowest answer seen here is well under 0.1 s
REQUEST_TIMEOUT = 30
# Bounds against a hang, not timings: schemathesis' own work (generating each case in Python) is
# most of a run, and it slows with the machine. All four runs take about 60 s on an idle 2-core
# machine and took 250 s on a slow shared one (2026-11-28), the session run alone 134 s.
RUN_DEADLINE = 400  # seconds for one schemathesis run, however slow the machine
TOTAL_DEADLINE = 900  # seconds for all of them
# A well-formed session token (tbs_ + 43 base64url characters) that names no session.
FORGED_TOKEN = "tbs_" + "F0rgedF0rgedF0rgedF0rgedF0rgedF0rgedF0rged0"

OPERATION_PATHS = {"/authorize", "/callback", "/token", "/refresh", "/revoke", "/profile", "/session",
                   "/healthz", "/readyz", "/metrics"}
BEARER_OPERATIONS = {"POST /authorize", "GET /token", "POST /refresh", "POST /revoke", "GET /profile",
                     "GET /session"}
ALL_OPERATIONS = {"GET /authorize", "POST /authorize", "GET /callback", "POST /token", "GET /token",
                  "POST /refresh", "POST /revoke", "GET /profile", "GET /session", "GET /healthz",
                  "GET /readyz", "GET /metrics"}


@dataclass
class Run:
    name: str
    max_examples: int
    headers: dict = field(default_factory=dict)
    include_paths: tuple = ()
    exclude_paths: tuple = ()
    fresh_sessions: bool = False


@dataclass
class Outcome:
    run: Run
    exit_code: int
    output: str
    report: dict
    # (operation label, status) -> number of HTTP requests schemathesis sent
    statuses: collections.Counter
    bodies: collections.Counter  # (operation label, status, body) for small JSON bodies
    requests: int
    access_log_requests: int

    @property
    def generated(self) -> int:
        return self.report["test_cases"]["generated"]

    @property
    def operations(self) -> set:
        return {label for label, _ in self.statuses}


def schemathesis_version() -> str:
    from importlib.metadata import version

    return version("schemathesis")


# --- the broker ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    yield from contract_broker.running_broker(tmp_path_factory)


# --- running schemathesis -----------------------------------------------------------------------


def run_schemathesis(run: Run, broker: dev_flow.DevBroker, workdir: Path, deadline: float) -> Outcome:
    reports = workdir / run.name
    reports.mkdir(parents=True, exist_ok=True)
    command = [
        str(SCHEMATHESIS), "--config-file", str(CONFIG), "--no-color",
        "run", str(OPENAPI),
        "--url", broker.base_url,
        "--max-examples", str(run.max_examples),
        "--generation-deterministic",
        "--workers", "1",
        "--continue-on-failure",
        "--max-redirects", "0",
        "--max-response-time", str(MAX_RESPONSE_TIME),
        "--request-timeout", str(REQUEST_TIMEOUT),
        "--output-truncate", "true",
        "--report", "json,ndjson",
        "--report-json-path", str(reports / "report.json"),
        "--report-ndjson-path", str(reports / "events.ndjson"),
    ]
    for name, value in run.headers.items():
        command += ["--header", f"{name}: {value}"]
    for path in run.include_paths:
        command += ["--include-path", path]
    for path in run.exclude_paths:
        command += ["--exclude-path", path]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCHEMATHESIS_", "CONTRACT_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["SCHEMATHESIS_HOOKS"] = "schemathesis_hooks"
    env["CONTRACT_BROKER_URL"] = broker.base_url
    env["COLUMNS"] = "120"
    if run.fresh_sessions:
        env["CONTRACT_FRESH_SESSIONS"] = "1"
    log_start = len(broker.lines)
    try:
        # cwd: schemathesis and hypothesis keep their working files beside it, never in the repo.
        done = subprocess.run(command, cwd=reports, env=env, capture_output=True, text=True, timeout=deadline)
    except subprocess.TimeoutExpired as exc:
        partial = (exc.stdout or b"")
        partial = partial.decode(errors="replace") if isinstance(partial, bytes) else partial
        pytest.fail(f"schemathesis run {run.name!r} was stopped after {deadline:.0f} s:\n{partial[-5000:]}")
    output = done.stdout + done.stderr
    report_path = reports / "report.json"
    assert report_path.exists(), f"schemathesis run {run.name!r} wrote no report:\n{output[-5000:]}"
    report = json.loads(report_path.read_text())
    statuses, bodies, sent = read_interactions(reports / "events.ndjson")
    served = [line for line in access_log(broker, log_start) if line.get("path") in OPERATION_PATHS]
    return Outcome(run, done.returncode, output, report, statuses, bodies, sent, len(served))


def read_interactions(path: Path) -> tuple[collections.Counter, collections.Counter, int]:
    """Every request schemathesis sent and its answer, from the NDJSON event stream."""
    statuses: collections.Counter = collections.Counter()
    bodies: collections.Counter = collections.Counter()
    sent = 0
    with path.open() as events:
        for line in events:
            event = json.loads(line)
            finished = event.get("ScenarioFinished")
            if not finished:
                continue
            recorder = finished["recorder"]
            label = recorder["label"]
            for interaction in (recorder.get("interactions") or {}).values():
                sent += 1
                response = interaction.get("response")
                if response is None:
                    statuses[(label, None)] += 1
                    continue
                status = response["status_code"]
                # Only the requests of the operation itself (not the other methods that the
                # unsupported_method check tries on its path) count as its answers.
                if interaction["request"]["method"] != label.split()[0]:
                    statuses[("other method on " + label.split()[1], status)] += 1
                    continue
                statuses[(label, status)] += 1
                content = (response.get("content") or {}).get("$base64")
                if content and len(content) < 400:
                    bodies[(label, status, canonical_json(base64.b64decode(content)))] += 1
    return statuses, bodies, sent


def canonical_json(data) -> str:
    """A JSON body (bytes or a value) as one comparable string; other bodies as text."""
    if isinstance(data, bytes):
        try:
            data = json.loads(data)
        except ValueError:
            return data.decode("utf-8", "replace")
    return json.dumps(data, sort_keys=True)


def describe(outcome: Outcome) -> str:
    by_operation: dict = collections.defaultdict(dict)
    for (label, status), count in sorted(outcome.statuses.items(), key=str):
        by_operation[label][status] = count
    lines = [f"  {label}: {statuses}" for label, statuses in sorted(by_operation.items())]
    return "\n".join(lines)


def failure_section(output: str) -> str:
    start = output.find("FAILURES")
    text = output[start - 40:] if start >= 0 else output
    return text[-20000:]


def fuzzing_runs(session_token: str) -> list[Run]:
    return [
        Run("session", max_examples=100, headers={"Authorization": f"Bearer {session_token}"},
            exclude_paths=("/revoke",)),
        Run("forged", max_examples=40,
            headers={"Authorization": f"Bearer {FORGED_TOKEN}", "Accept": "application/json"}),
        Run("anonymous", max_examples=40, headers={"Accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"}),
        Run("revoke", max_examples=40, include_paths=("/revoke",), fresh_sessions=True),
    ]


def test_schemathesis_finds_no_contract_violation(broker, tmp_path, contract_summary):
    assert SCHEMATHESIS.exists(), f"schemathesis is not installed beside {sys.executable} (requirements.txt)"
    token = dev_flow.sign_in(broker.base_url)["session_token"]

    started = time.monotonic()
    outcomes = []
    for run in fuzzing_runs(token):
        remaining = TOTAL_DEADLINE - (time.monotonic() - started)
        assert remaining > 0, f"no time left for the {run.name!r} run (over {TOTAL_DEADLINE} s in all)"
        outcome = run_schemathesis(run, broker, tmp_path, min(RUN_DEADLINE, remaining))
        outcomes.append(outcome)
        print(f"\n[{run.name}] {outcome.generated} test cases, {outcome.requests} requests sent, "
              f"{outcome.access_log_requests} answered by the broker, exit {outcome.exit_code}, "
              f"{outcome.report['running_time']:.1f} s\n{describe(outcome)}")
        assert broker.alive, f"the broker died during the {run.name!r} run:\n" + "\n".join(broker.lines[-30:])
    elapsed = time.monotonic() - started
    failed = [o for o in outcomes if o.exit_code != 0 or o.report["operations"]["errored"]]
    assert not failed, "\n\n".join(
        f"schemathesis run {o.run.name!r} found contract violations (exit {o.exit_code}):\n"
        + failure_section(o.output) for o in failed)

    generated = sum(o.generated for o in outcomes)
    sent = sum(o.requests for o in outcomes)
    served = sum(o.access_log_requests for o in outcomes)
    summary = (f"{generated} requests generated by schemathesis {schemathesis_version()} "
               f"({', '.join(f'{o.run.name} {o.generated}' for o in outcomes)}), {sent} sent, "
               f"{served} answered by the broker, in {elapsed:.0f} s")
    print("\ncontract fuzzing: " + summary)
    contract_summary.append(summary)
    assert generated >= MIN_REQUESTS, f"only {generated} generated requests"
    assert sent >= MIN_REQUESTS

    by_name = {o.run.name: o for o in outcomes}
    # Every operation was fuzzed, with and without a valid session.
    assert by_name["session"].operations >= ALL_OPERATIONS - {"POST /revoke"}
    assert by_name["forged"].operations >= ALL_OPERATIONS
    assert by_name["anonymous"].operations >= ALL_OPERATIONS
    assert "POST /revoke" in by_name["revoke"].operations

    # The session run was authenticated to the end: every bearer operation got 200s, and the
    # session is still alive (nothing the fuzzer sent may end it).
    session_statuses = by_name["session"].statuses
    for label in BEARER_OPERATIONS - {"POST /revoke"}:
        assert session_statuses[(label, 200)] > 0, f"{label}: no 200 with the live session"
    for label in ("GET /authorize",):
        assert session_statuses[(label, 302)] > 0, f"{label}: no redirect to the provider"
    alive = requests.get(f"{broker.base_url}/session", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert alive.status_code == 200, f"the fuzzed session ended: {alive.status_code} {alive.text}"

    # The forged token never opened a session; revoking with it is the documented no-op.
    forged = by_name["forged"].statuses
    for label in BEARER_OPERATIONS - {"POST /revoke"}:
        assert forged[(label, 200)] == 0, f"{label} answered 200 to a forged token"
    not_attempted = canonical_json({"revoked": True, "provider_revocation": "not_attempted"})
    assert ("POST /revoke", 200, not_attempted) in by_name["forged"].bodies
    assert forged[("GET /authorize", 200)] > 0, "GET /authorize never answered JSON to Accept: application/json"
    # The revoke run revoked live sessions at the provider.
    succeeded = canonical_json({"revoked": True, "provider_revocation": "succeeded"})
    assert ("POST /revoke", 200, succeeded) in by_name["revoke"].bodies

    # Server side: no 5xx in the broker's own access log.
    server_errors = [line for line in access_log(broker, 0) if str(line.get("status", "")).startswith("5")]
    assert not server_errors, f"the broker answered 5xx: {server_errors[:10]}"
