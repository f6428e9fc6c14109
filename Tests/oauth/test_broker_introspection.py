"""Token introspection (RFC 7662) for backends: a Flask API protected by authlib's introspection
validator accepts a live session token and refuses a revoked one — on one instance with the
embedded store, and on two PostgreSQL instances where the token is revoked on the other one.
Only the configured resource servers may ask — with a secret, or with client assertions signed by
a key of theirs (`private_key_jwt`, as requests-oauth2client sends them), each assertion once on
every instance; the answer never holds a provider token."""

from __future__ import annotations

import base64
import json
import time
import uuid

import pytest
import requests
from jwskate import Jwk, Jwt
from requests_oauth2client import OAuth2Client, PrivateKeyJwt

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
    # One method only (RFC 6749 §2.3): two, even one of them right, name no caller.
    for auth, data in ((("orders", SECRET), {"client_id": "slow", "client_secret": SLOW_SECRET}),
                       (("orders", SECRET), {"client_id": "slow"}),
                       (("orders", "wrong-" + SECRET), {"client_id": "orders", "client_secret": SECRET})):
        two = requests.post(broker.url("/introspect"), auth=auth, data={"token": app.session_token, **data}, timeout=10)
        assert two.status_code == 401 and two.json()["error"] == "invalid_client", two.text
    answers = [introspect(broker, app.session_token, auth=("slow", SLOW_SECRET)) for _ in range(3)]
    assert [answer.status_code for answer in answers] == [200, 200, 429]
    assert answers[2].json()["error_description"] == "Too many requests of this resource server; retry later."
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


def signing_server(tmp_path) -> tuple[Jwk, str]:
    """A resource server key and the `resource_servers` lines naming its public key set."""
    key = Jwk.generate(alg="ES256", kid="signed-1")
    jwks = tmp_path / "signed-jwks.json"
    jwks.write_text(json.dumps({"keys": [dict(key.public_jwk())]}))
    return key, f"  signed:\n    jwks_file: {jwks}\n"


def assertion(key: Jwk, audience: str, **claims) -> str:
    now = int(time.time())
    body = {"iss": "signed", "sub": "signed", "aud": audience, "iat": now, "exp": now + 60, "jti": str(uuid.uuid4()), **claims}
    return str(Jwt.sign(body, key=key, alg="ES256", extra_headers={"kid": key.kid}))


ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def test_a_resource_server_may_authenticate_with_its_key_each_assertion_once(auth_server, browser, tmp_path):
    key, lines = signing_server(tmp_path)
    port = free_port()
    client_id, secret = auth_server.register_client([f"http://127.0.0.1:{port}/callback"])
    broker = BrokerProcess(broker_config(provider_config(auth_server, client_id)) + RESOURCE_SERVERS + lines,
                           env={"DOT_CLIENT_SECRET": secret, **ENV}, port=port)
    try:
        app = App(broker, browser)
        app.login("alice")
        metadata = requests.get(broker.url("/.well-known/oauth-authorization-server/providers/dot"), timeout=10).json()
        endpoint = metadata["introspection_endpoint"]
        # requests-oauth2client signs a new assertion for each call, its aud the endpoint's URL.
        backend = OAuth2Client(token_endpoint=metadata["token_endpoint"], introspection_endpoint=endpoint,
                               auth=PrivateKeyJwt("signed", key, alg="ES256"), testing=True)
        described = backend.introspect_token(app.session_token)
        assert described["active"] is True and described["client_id"] == "web"
        assert backend.introspect_token(app.session_token)["active"] is True

        made = assertion(key, endpoint)
        form = {"token": app.session_token, "client_assertion_type": ASSERTION_TYPE, "client_assertion": made}
        assert requests.post(endpoint, data=form, timeout=10).json()["active"] is True
        replayed = requests.post(endpoint, data=form, timeout=10)
        assert replayed.status_code == 401 and replayed.json()["error"] == "invalid_client", "an assertion is good once"
        with_basic = requests.post(endpoint, timeout=10, auth=("orders", "wrong"), data={
            "token": app.session_token, "client_assertion_type": ASSERTION_TYPE, "client_assertion": assertion(key, endpoint)})
        assert with_basic.status_code == 401 and "active" not in with_basic.text, "an assertion and a Basic header: two methods"
        stranger = Jwk.generate(alg="ES256", kid="signed-1")
        for bad in (assertion(stranger, endpoint), assertion(key, "https://elsewhere.example/introspect"),
                    assertion(key, endpoint, exp=int(time.time()) - 60), assertion(key, endpoint, exp=int(time.time()) + 3600),
                    assertion(key, endpoint, iss="orders", sub="orders")):
            refused = requests.post(endpoint, timeout=10,
                                    data={"token": app.session_token, "client_assertion_type": ASSERTION_TYPE, "client_assertion": bad})
            assert refused.status_code == 401 and "active" not in refused.text
        assert wait_for(lambda: any("introspection refused a client authentication" in line for line in broker.lines), 30)
    finally:
        broker.stop()


def test_an_assertion_is_good_once_across_instances_sharing_postgres(auth_server, browser, tmp_path):
    key, lines = signing_server(tmp_path)
    with PostgresCluster() as postgres:
        ports = [free_port(), free_port()]
        public = f"http://127.0.0.1:{ports[0]}"
        client_id, secret = auth_server.register_client([f"{public}/callback"])
        env = {"DOT_CLIENT_SECRET": secret, "BROKER_STATE_BACKEND": "postgres", "BROKER_POSTGRES_URL": postgres.create_database(),
               "BROKER_POSTGRES_PASSWORD": postgres.password, "BROKER_PUBLIC_URL": public, **ENV}
        config = broker_config(provider_config(auth_server, client_id)) + RESOURCE_SERVERS + lines
        brokers = [BrokerProcess(config, env=env, port=port) for port in ports]
        try:
            app = App(brokers[0], browser)
            app.login("alice")
            form = {"token": app.session_token, "client_assertion_type": ASSERTION_TYPE,
                    "client_assertion": assertion(key, f"{public}/introspect")}
            assert requests.post(brokers[1].url("/introspect"), data=form, timeout=10).json()["active"] is True
            replayed = requests.post(brokers[0].url("/introspect"), data=form, timeout=10)
            assert replayed.status_code == 401 and replayed.json()["error"] == "invalid_client"
        finally:
            for broker in brokers:
                broker.stop()
