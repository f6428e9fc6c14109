"""Schemathesis hooks for the contract fuzzing runs (loaded through SCHEMATHESIS_HOOKS).

- filter_failure: drops a negative_data_rejection failure ("schema-violating request accepted")
  only when the server bugs listed in known_server_bugs.py explain it entirely, and writes each
  one it drops to CONTRACT_EXPECTED_FAILURES (one JSON object a line) so that the test reports
  them as expected failures. Every other failure stands.
- With CONTRACT_FRESH_SESSIONS=1 (the run that fuzzes POST /revoke), every generated test case
  signs in anew (the README's walk-through against the broker at CONTRACT_BROKER_URL) and so
  revokes a live session that nothing else uses.
"""
from __future__ import annotations

import json
import os

import schemathesis

import dev_flow
import known_server_bugs

BROKER_URL = os.environ["CONTRACT_BROKER_URL"]
EXPECTED_FAILURES = os.environ.get("CONTRACT_EXPECTED_FAILURES")


@schemathesis.hook
def filter_failure(context, failure, case, response):
    if type(failure).__name__ != "AcceptedNegativeData":
        return True
    label = case.operation.label
    fields = known_server_bugs.received_fields(label, response.request)
    bugs = known_server_bugs.explaining_bugs(label, fields) if fields is not None else []
    if not bugs:
        return True
    if EXPECTED_FAILURES:
        with open(EXPECTED_FAILURES, "a", encoding="utf-8") as out:
            out.write(json.dumps({"operation": label, "status": response.status_code,
                                  "bugs": [bug.id for bug in bugs], "case": case.id}) + "\n")
    return False


if os.environ.get("CONTRACT_FRESH_SESSIONS") == "1":

    @schemathesis.auth(refresh_interval=None, retry_on=[])
    class FreshSession:
        """A new live session token for every test case: nothing is cached, nothing is retried."""

        def get(self, case, context):
            return dev_flow.sign_in(BROKER_URL)["session_token"]

        def set(self, case, data, context):
            case.headers = case.headers or {}
            case.headers["Authorization"] = f"Bearer {data}"
