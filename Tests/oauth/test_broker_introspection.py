"""Token introspection (RFC 7662) for backends: a Flask API protected by authlib's introspection
validator accepts a live session token and refuses a revoked one — on one instance with the
embedded store, and on two PostgreSQL instances where the token is revoked on the other one.
Only the configured resource servers may ask; the answer never holds a provider token."""

from __future__ import annotations

import base64

import pytest
import requests

from support.broker import App, BrokerProcess, broker_config, free_port, provider_config, wait_for
from support.postgres import PostgresCluster
from support.resource_server import ResourceServer

SECRET = "orders-secret-0123456789abcdef0123456789"
SLOW_SECRET = "slow-secret-0123456789abcdef0123456789ab"
RESOURCE_SERVERS = """resource_servers:
  orders:
    secret_env: ORDERS_SECRET
  slow:
    secret_env: SLOW_SECRET
    requests_per_minute: 2
"""
ENV = {"ORDERS_SECRET": SECRET, "SLOW_SECRET": SLOW_SECRET}


@pytest.fixture
def signed_in(auth_server, browser):
    port = free_port()
    client_id, secret = auth_server.register_client([f"http://127.0.0.1:{port}/callback"])
    broker = BrokerProcess(broker_config(provider_config(auth_server, client_id)) + RESOURCE_SERVERS,
                           env={"DOT_CLIENT_SECRET": secret, **ENV}, port=port)
    try:
        app = App(broker, browser)
        app.login("alice")
        yield broker, app
    finally:
        broker.stop()


def introspect(broker, token, auth=("orders", SECRET), **data):
    return requests.post(broker.url("/introspect"), data={"token": token, **data}, auth=auth, timeout=10)


def test_a_backend_with_authlibs_validator_accepts_a_live_session_and_refuses_it_once_revoked(signed_in, auth_server):
    broker, app = signed_in
    metadata = requests.get(broker.url("/.well-known/oauth-authorization-server/providers/dot"), timeout=10).json()
    backend = ResourceServer(metadata["introspection_endpoint"], "orders", SECRET)
    try:
        subject = app.call("GET", "/session").json()["subject"]
        answer = backend.get("/orders", app.session_token)
        assert answer.status_code == 200 and answer.json() == {"user": subject, "provider": "dot", "app": "web"}, answer.text
        assert backend.get("/admin", app.session_token).status_code == 403, "a scope the session lacks"
        assert app.call("POST", "/revoke").status_code == 200
        assert backend.get("/orders", app.session_token).status_code == 401
    finally:
        backend.close()


def test_the_answer_describes_the_session_and_never_holds_a_provider_token(signed_in):
    broker, app = signed_in
    tokens = app.call("GET", "/token").json()
    subject = app.call("GET", "/session").json()["subject"]
    answer = introspect(broker, app.session_token, token_type_hint="access_token")
    assert answer.status_code == 200 and answer.headers["Cache-Control"] == "no-store"
    body = answer.json()
    assert body["active"] is True and (body["sub"], body["provider"], body["client_id"]) == (subject, "dot", "web")
    assert body["token_type"] == "Bearer" and body["iss"].endswith("/providers/dot")
    assert "openid" in body["scope"].split() and body["iat"] <= body["exp"]
    assert tokens["access_token"] not in answer.text
    # What is not a live session token of the broker is inactive, and nothing more is said.
    for other in (tokens["access_token"], "tbs_" + "A" * 43, "garbage"):
        assert introspect(broker, other).json() == {"active": False}


def test_only_configured_resource_servers_ask_each_within_its_limit(signed_in):
    broker, app = signed_in
    for auth in (None, ("orders", "wrong-" + SECRET), ("nobody", SECRET)):
        refused = introspect(broker, app.session_token, auth=auth)
        assert refused.status_code == 401 and refused.json()["error"] == "invalid_client"
        assert refused.headers["WWW-Authenticate"].startswith("Basic")
        assert "active" not in refused.text
    # client_secret_post works too.
    posted = requests.post(broker.url("/introspect"), timeout=10,
                           data={"token": app.session_token, "client_id": "orders", "client_secret": SECRET})
    assert posted.json()["active"] is True
    statuses = [introspect(broker, app.session_token, auth=("slow", SLOW_SECRET)).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    assert introspect(broker, app.session_token).status_code == 200, "each backend has its own limit"
    metrics = requests.get(broker.url("/metrics"), timeout=10).text
    for outcome in ("active", "unauthenticated", "rate_limited"):
        assert f'broker_introspections_total{{outcome="{outcome}"}}' in metrics
    basic = base64.b64encode(f"orders:{SECRET}".encode()).decode()
    assert SECRET not in "\n".join(broker.lines) and basic not in "\n".join(broker.lines)


def test_without_resource_servers_nobody_may_introspect(broker_factory):
    broker, app, _, _ = broker_factory()
    app.login("alice")
    refused = requests.post(broker.url("/introspect"), data={"token": app.session_token}, auth=("orders", SECRET), timeout=10)
    assert refused.status_code == 401 and "No resource servers are configured" in refused.json()["error_description"]
    metadata = requests.get(broker.url("/.well-known/oauth-authorization-server/providers/dot"), timeout=10).json()
    assert "introspection_endpoint" not in metadata


def test_a_revocation_on_one_instance_reaches_introspection_on_another(auth_server, browser):
    with PostgresCluster() as postgres:
        ports = [free_port(), free_port()]
        client_id, secret = auth_server.register_client([f"http://127.0.0.1:{ports[0]}/callback"])
        env = {"DOT_CLIENT_SECRET": secret, "BROKER_STATE_BACKEND": "postgres", "BROKER_POSTGRES_URL": postgres.create_database(),
               "BROKER_POSTGRES_PASSWORD": postgres.password, "BROKER_PUBLIC_URL": f"http://127.0.0.1:{ports[0]}", **ENV}
        config = broker_config(provider_config(auth_server, client_id)) + RESOURCE_SERVERS
        brokers = [BrokerProcess(config, env=env, port=port) for port in ports]
        try:
            app = App(brokers[0], browser)
            app.login("alice")
            backend = ResourceServer(brokers[1].url("/introspect"), "orders", SECRET)
            try:
                assert backend.get("/orders", app.session_token).status_code == 200
                assert app.call("POST", "/revoke").status_code == 200
                # As soon as GET /token on that instance refuses it, so does introspection there.
                assert wait_for(lambda: requests.get(brokers[1].url("/token"), timeout=10,
                                                     headers={"Authorization": f"Bearer {app.session_token}"}).status_code == 401, 10)
                assert backend.get("/orders", app.session_token).status_code == 401
            finally:
                backend.close()
        finally:
            for broker in brokers:
                broker.stop()
