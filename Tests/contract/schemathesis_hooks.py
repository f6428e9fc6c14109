"""Schemathesis hooks for the contract fuzzing runs (loaded through SCHEMATHESIS_HOOKS).

With CONTRACT_FRESH_SESSIONS=1 (the run that fuzzes POST /revoke), every generated test case
signs in anew (the README's walk-through against the broker at CONTRACT_BROKER_URL) and so
revokes a live session that nothing else uses.
"""
from __future__ import annotations

import os

import schemathesis

import dev_flow

BROKER_URL = os.environ["CONTRACT_BROKER_URL"]


if os.environ.get("CONTRACT_FRESH_SESSIONS") == "1":

    @schemathesis.auth(refresh_interval=None, retry_on=[])
    class FreshSession:
        """A new live session token for every test case: nothing is cached, nothing is retried."""

        def get(self, case, context):
            return dev_flow.sign_in(BROKER_URL)["session_token"]

        def set(self, case, data, context):
            case.headers = case.headers or {}
            case.headers["Authorization"] = f"Bearer {data}"
