"""The live broker of the contract tests (test_schemathesis.py, test_schemathesis_flow.py): the real
`token-broker` in development mode (dev_flow.DevBroker), with no rate limits and the admin API
behind a token nobody knows; when it stops, it must have exited 0, logged no error and answered
no 5xx."""
from __future__ import annotations

import base64
import os

import dev_flow


# The per-client rate limits of /authorize, /callback and POST /token (429 + Retry-After) are
# tested on their own; here they would turn most generated requests into 429s, all from 127.0.0.1.
# 0 = no limit. (A broker that does not know these variables ignores them.)
BROKER_ENV = {"BROKER_LOGIN_REQUESTS_PER_MINUTE": "0", "BROKER_TOKEN_REQUESTS_PER_MINUTE": "0"}


def running_broker(tmp_path_factory):
    # The admin API on the public listener behind a token the fuzzer does not know: every admin
    # request it makes is refused (401), which the contract must describe.
    token_file = tmp_path_factory.mktemp("admin") / "admin-token"
    token_file.write_text(base64.urlsafe_b64encode(os.urandom(32)).decode())
    process = dev_flow.DevBroker(env={**BROKER_ENV, "BROKER_ADMIN_TOKEN_FILE": str(token_file)})
    yield process
    code = process.stop()
    problems = [line for line in process.json_lines() if line.get("level") in ("error", "critical", "unparsed")]
    server_errors = [line for line in access_log(process, 0) if str(line.get("status", "")).startswith("5")]
    assert code == 0, f"the broker exited with {code}:\n" + "\n".join(process.lines[-30:])
    assert not problems, f"the broker logged errors: {problems[:10]}"
    assert not server_errors, f"the broker answered 5xx: {server_errors[:10]}"


def access_log(broker: dev_flow.DevBroker, start: int) -> list[dict]:
    return [line for line in broker.json_lines(start) if line.get("msg") == "request"]
