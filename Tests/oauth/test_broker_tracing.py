"""A sign-in you can follow, and traces that pass through (issue 42, item 4): one id names every
log line of a sign-in, from /authorize to the session it became; a caller's W3C `traceparent`
and `X-Request-Id` reach the provider (a forced refresh at the real authorization server) and
the API (through the proxy), and the access log names the trace."""

from __future__ import annotations

import pytest
import requests

from support.broker import wait_for
from support.recording_upstream import RecordingUpstream

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.fixture
def upstream():
    server = RecordingUpstream()
    yield server
    server.close()


def lines(broker, msg):
    return [line for line in broker.json_lines() if line.get("msg") == msg]


def test_one_id_follows_a_sign_in_from_authorize_to_its_session(broker_factory):
    broker, app, _, _ = broker_factory()
    app.login("alice")
    assert wait_for(lambda: lines(broker, "sign-in completed"), timeout=10)
    [started], [returned], [completed] = (lines(broker, msg) for msg in
                                          ("sign-in started", "signed in at the provider", "sign-in completed"))
    sign_in = started["sign_in"]
    assert len(sign_in) == 12 and returned["sign_in"] == sign_in and completed["sign_in"] == sign_in
    assert (started["provider"], started["app"], started["purpose"]) == ("dot", "web", "app")
    assert (completed["provider"], completed["app"]) == ("dot", "web") and len(completed["session"]) == 64
    # Each step's line names its request, as that request's access-log line does (written by
    # the access log's own thread: waited for).
    def paths():
        requests = {line["request_id"]: line["path"] for line in lines(broker, "request")}
        return [requests.get(line["request_id"]) for line in (started, returned, completed)]
    assert wait_for(lambda: None not in paths(), timeout=10), paths()
    assert paths() == ["/authorize", "/callback", "/token"]
    # Never a token, code or state (the broker's own start tbs_, tbh_ and tbst_): only ids made
    # for the log.
    text = "\n".join(broker.lines)
    assert app.session_token not in text and "tbh_" not in text and "tbst_" not in text


def test_the_callers_trace_reaches_the_provider_and_the_api_and_the_access_log(broker_factory, auth_server, upstream):
    broker, app, _, _ = broker_factory(provider_extra=f"    api_base_url: {upstream.base_url}\n    api_allow_private_addresses: true\n")
    app.login("alice")
    auth_server.reset_stats()
    traced = {"traceparent": TRACEPARENT, "tracestate": "vendor=1", "X-Request-Id": "incident-42"}
    assert app.call("POST", "/refresh", headers=traced).status_code == 200
    [refresh] = [entry for entry in auth_server.traces() if entry["endpoint"] == "token"]
    assert refresh == {"endpoint": "token", "traceparent": TRACEPARENT, "x_request_id": "incident-42"}

    assert app.call("GET", "/proxy/dot/items", headers=traced).status_code == 200
    headers = upstream.last()["headers"]
    assert (headers["traceparent"], headers["tracestate"], headers["x-request-id"]) == (TRACEPARENT, "vendor=1", "incident-42")

    # Without a trace, the request id alone goes on (the broker's own when the caller sent none).
    assert app.call("GET", "/proxy/dot/items").status_code == 200
    plain = upstream.last()["headers"]
    assert "traceparent" not in plain and plain["x-request-id"]

    # A malformed traceparent is not passed on (and its tracestate with it).
    assert app.call("GET", "/proxy/dot/items", headers={"traceparent": "00-" + "0" * 32 + "-00f067aa0ba902b7-01",
                                                      "tracestate": "vendor=1"}).status_code == 200
    assert "traceparent" not in upstream.last()["headers"] and "tracestate" not in upstream.last()["headers"]

    assert wait_for(lambda: len([line for line in lines(broker, "request") if line.get("trace_id") == TRACE_ID]) == 2, timeout=10)
    assert {line["path"] for line in lines(broker, "request") if line.get("trace_id") == TRACE_ID} == {"/refresh", "/proxy/dot/items"}
    assert all(line["request_id"] == "incident-42" for line in lines(broker, "request") if line.get("trace_id"))


def test_the_refresh_after_an_apis_401_carries_the_callers_trace(broker_factory, auth_server, upstream):
    """The proxy's answer starts and ends on threads, without a task; the refresh it makes when
    the API refuses the token runs in one, and passes the caller's trace on all the same."""
    broker, app, _, _ = broker_factory(provider_extra=f"    api_base_url: {upstream.base_url}\n    api_allow_private_addresses: true\n")
    app.login("alice")
    upstream.refused_tokens.add(app.call("GET", "/token").json()["access_token"])
    auth_server.reset_stats()
    traced = {"traceparent": TRACEPARENT, "X-Request-Id": "incident-43"}
    assert app.call("GET", "/proxy/dot/protected", headers=traced).status_code == 200
    [refresh] = [entry for entry in auth_server.traces() if entry["endpoint"] == "token"]
    assert refresh == {"endpoint": "token", "traceparent": TRACEPARENT, "x_request_id": "incident-43"}
    assert upstream.count() == 2, "sent again with the new token"


def test_on_another_instance_the_refresh_after_an_apis_401_carries_the_callers_trace(instances, auth_server):
    """On PostgreSQL, an instance that has not seen the session reads it from the database first
    (a deferred reply, whose proxy call runs inside its task): the refresh the provider's 401
    makes there carries the caller's trace as well."""
    brokers, apps, _ = instances
    apps[0].login("alice")
    token = apps[0].session_token
    auth_server.expire_access_token(requests.get(brokers[0].url("/token"), headers={"Authorization": f"Bearer {token}"},
                                                 timeout=10).json()["access_token"])
    auth_server.reset_stats()
    answer = requests.get(brokers[2].url("/proxy/dot/userinfo/"), timeout=20,
                          headers={"Authorization": f"Bearer {token}", "traceparent": TRACEPARENT, "X-Request-Id": "incident-44"})
    assert answer.status_code == 200, answer.text
    [refresh] = [entry for entry in auth_server.traces() if entry["endpoint"] == "token"]
    assert refresh == {"endpoint": "token", "traceparent": TRACEPARENT, "x_request_id": "incident-44"}
