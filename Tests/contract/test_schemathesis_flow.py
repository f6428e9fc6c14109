"""The contract's scripted walk-through, on the live broker (contract_broker.py), with
openapi.yaml as the oracle (contract fuzzing: test_schemathesis.py).

A scripted walk-through (test_flow_answers_conform) checks, with the same schemathesis checks, the
answers generated requests cannot reach: the 302s of /authorize and /callback, the 200 of
POST /token, incremental authorization, revocation of a live session, the limits' 413/414/431,
and the requests of the server bugs fuzzing found (all fixed) as regression checks.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import pytest
import requests

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import contract_broker  # noqa: E402
import dev_flow  # noqa: E402

OPENAPI = HERE.parents[1] / "openapi.yaml"
REQUEST_TIMEOUT = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    yield from contract_broker.running_broker(tmp_path_factory)


# --- the flow, step by step, with the same checks ------------------------------------------------


@pytest.fixture(scope="module")
def schema():
    import schemathesis

    return schemathesis.openapi.from_path(str(OPENAPI))


class Contract:
    """Sends one request through schemathesis and validates the answer with its checks."""

    def __init__(self, schema, base_url: str):
        from schemathesis.checks import not_a_server_error
        from schemathesis.specs.openapi.checks import (
            content_type_conformance,
            response_headers_conformance,
            response_schema_conformance,
            status_code_conformance,
        )

        self.schema = schema
        self.base_url = base_url
        self.checks = [not_a_server_error, status_code_conformance, content_type_conformance,
                       response_headers_conformance, response_schema_conformance]

    def __call__(self, method: str, path: str, expect: int, *, query=None, headers=None, body=None,
                 media_type: Optional[str] = None, token: Optional[str] = None) -> requests.Response:
        operation = self.schema[path][method]
        headers = dict(headers or {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        kwargs = {"query": query or {}, "headers": headers}
        if body is not None:
            kwargs.update(body=body, media_type=media_type or "application/x-www-form-urlencoded")
        case = operation.Case(**kwargs)
        # The request exactly as schemathesis serialises the case; sent here so no redirect is followed.
        response = requests.request(**case.as_transport_kwargs(base_url=self.base_url), allow_redirects=False,
                                    timeout=REQUEST_TIMEOUT)
        assert response.status_code == expect, f"{method} {path}: {response.status_code} {response.text[:500]}"
        case.validate_response(response, checks=self.checks)
        return response


def test_flow_answers_conform(broker, schema):
    contract = Contract(schema, broker.base_url)
    http = requests.Session()
    verifier, challenge = dev_flow.pkce()
    authorize = dict(provider=dev_flow.PROVIDER, app=dev_flow.APP, redirect_uri=dev_flow.REDIRECT_URI,
                     code_challenge=challenge, code_challenge_method="S256", state="xyz")

    # GET /authorize: JSON when asked for, otherwise a redirect to the provider.
    answer = contract("GET", "/authorize", 200, query=authorize, headers={"Accept": "application/json"})
    assert answer.json()["authorization_url"].startswith(broker.base_url + "/dev/authorize?")
    answer = contract("GET", "/authorize", 302, query=authorize)
    callback = dev_flow.sign_in_at_provider(answer.headers["Location"], http)
    assert callback.startswith(broker.base_url + "/callback?")

    # GET /callback: a redirect to the app with a handoff code; the broker state is single use.
    callback_query = dev_flow.query_of(callback)
    answer = contract("GET", "/callback", 302, query=callback_query)
    back = dev_flow.query_of(answer.headers["Location"])
    assert answer.headers["Location"].startswith(dev_flow.REDIRECT_URI + "?") and back["state"] == "xyz"
    contract("GET", "/callback", 400, query=callback_query)
    page = contract("GET", "/callback", 400, query=callback_query, headers={"Accept": "text/html"})
    assert page.headers["Content-Type"].startswith("text/html")

    # POST /token (as JSON this time): a session; a replayed code is invalid_grant and ends it.
    form = dev_flow.token_form(back["code"], verifier)
    tokens = contract("POST", "/token", 200, body=form, media_type="application/json").json()
    assert tokens["session_token"].startswith("tbs_") and tokens["provider"] == "dev"
    replay = contract("POST", "/token", 400, body=form)
    assert replay.json()["error"] == "invalid_grant"
    contract("GET", "/session", 401, token=tokens["session_token"])

    # A provider error goes back to the app as a redirect carrying the app's state.
    sign_in_url, _ = dev_flow.start_login(broker.base_url, http, state="denied-state")
    broker_state = dev_flow.query_of(sign_in_url)["state"]
    answer = contract("GET", "/callback", 302, query={"state": broker_state, "error": "access_denied",
                                                      "error_description": "The user said no."})
    denied = dev_flow.query_of(answer.headers["Location"])
    assert denied["error"] == "access_denied" and denied["state"] == "denied-state" and "code" not in denied

    # A live session: every bearer operation, incremental authorization, then revocation.
    token = dev_flow.sign_in(broker.base_url)["session_token"]
    assert contract("GET", "/session", 200, token=token).json()["subject"] == "dev-alice"
    contract("GET", "/token", 200, token=token)
    contract("GET", "/token", 200, token=token, query={"min_ttl": 86400})
    assert contract("GET", "/profile", 200, token=token).json()["email"] == "alice@example.test"
    # Refreshed by min_ttl=86400 moments ago: a forced refresh now is 429 with Retry-After.
    assert contract("POST", "/refresh", 429, token=token).headers["Retry-After"].isdigit()
    _, challenge = dev_flow.pkce()
    more = dict(app=dev_flow.APP, redirect_uri=dev_flow.REDIRECT_URI, code_challenge=challenge,
                code_challenge_method="S256", scope="offline_access")
    contract("POST", "/authorize", 200, token=token, body=more)
    contract("POST", "/authorize", 200, token=token, body=more, media_type="application/json")
    assert contract("POST", "/revoke", 200, token=token).json()["provider_revocation"] == "succeeded"
    assert contract("POST", "/revoke", 200, token=token).json()["provider_revocation"] == "not_attempted"
    for method, path in (("GET", "/session"), ("GET", "/token"), ("GET", "/profile"), ("POST", "/refresh")):
        assert contract(method, path, 401, token=token).headers["WWW-Authenticate"].startswith("Bearer ")
    contract("POST", "/revoke", 401)
    for path in ("/healthz", "/readyz", "/metrics"):
        contract("GET", path, 200)

    # The limits checked before routing answer as the contract says, on any operation.
    contract("POST", "/token", 413, body={"code": "a" * 70_000})
    contract("GET", "/healthz", 414, query={"padding": "a" * 9_000})

    # What contract fuzzing found once, answered as the contract says now.
    for bad in ({"scope": "s" * 2049}, {"scope": "openid  email "}, {"scope": " "}, {"state": "a\x01\u00e9"},
                {"prompt": "login  consent "}):
        answer = contract("GET", "/authorize", 400, query={**authorize, **bad})
        assert answer.json()["error"] == "invalid_request", bad
    sign_in_url, _ = dev_flow.start_login(broker.base_url, http)
    answer = contract("GET", "/callback", 302, query={"state": dev_flow.query_of(sign_in_url)["state"], "error": 'bad"code'})
    assert dev_flow.query_of(answer.headers["Location"])["error"] == "invalid_request"
    contract("GET", "/session", 431, headers={"X-Padding": "a" * 17_000})
