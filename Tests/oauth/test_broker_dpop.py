"""Session tokens bound to a key of the app's (DPoP, RFC 9449): requests-oauth2client, a client
library nobody here wrote, signs in through the standard endpoints with DPoP from the metadata
alone, gets a DPoP-bound token and uses it at the broker (its proofs made by the library); the
broker's own `POST /token` binds a session the same way. Every use of a bound token needs a fresh
proof of its key — hand-made bad proofs are each refused, and change nothing — and a proof is
accepted once, on every instance sharing a PostgreSQL store. Introspection tells backends the
binding (`cnf.jkt`)."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import re
import time
import uuid

import pytest
import requests
from jwskate import Jwk, Jwt
from requests_oauth2client import DPoPToken, OAuth2Client

from support.broker import App, BrokerProcess, broker_config, free_port, provider_config
from support.browser import query_params
from support.pkce import make_pkce
from support.postgres import PostgresCluster

REDIRECT_URI = "http://127.0.0.1:9/cb"
SECRET = "orders-secret-0123456789abcdef0123456789"
RESOURCE_SERVERS = "resource_servers:\n  orders:\n    secret_env: ORDERS_SECRET\n"
APPS = ("  web:\n    redirect_uris: [http://127.0.0.1/cb]\n  bound:\n    redirect_uris: [http://127.0.0.1/cb]\n    dpop: required\n"
        "  nonced:\n    redirect_uris: [http://127.0.0.1/cb]\n    dpop: required\n    dpop_nonce: true\n")


def proof(key: Jwk, method: str, url: str, *, token: str | None = None, headers: dict | None = None, **claims) -> str:
    """A DPoP proof made by hand (RFC 9449 §4.2), each part overridable to make it wrong."""
    body = {"jti": str(uuid.uuid4()), "htm": method, "htu": url, "iat": int(time.time())}
    if token is not None:
        body["ath"] = _ath(token)
    body.update(claims)
    header = {"jwk": key.public_jwk().minimize(), **(headers or {})}
    typ = header.pop("typ", "dpop+jwt")
    return str(Jwt.sign(body, key=key, alg=key.alg, typ=typ, extra_headers=header))


def _ath(token: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(token.encode()).digest()).rstrip(b"=").decode()


def bound_login(app: App, key: Jwk) -> dict:
    """Signs in at the broker's own endpoints, redeeming the code with a proof of `key`."""
    params, verifier = app.sign_in("alice")
    answer = requests.post(
        app.broker.url("/token"), timeout=30,
        data={"grant_type": "authorization_code", "code": params["code"], "code_verifier": verifier,
              "redirect_uri": app.redirect_uri, "app": app.app},
        headers={"DPoP": proof(key, "POST", app.broker.url("/token"))})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    app.session_token = body["session_token"]
    return body


def dpop_get(broker: BrokerProcess, path: str, token: str, key: Jwk, *, url: str | None = None, **overrides) -> requests.Response:
    target = url or broker.url(path)
    return requests.get(broker.url(path), timeout=10, headers={
        "Authorization": f"DPoP {token}", "DPoP": proof(key, "GET", target, token=token, **overrides)})


@pytest.fixture
def broker(auth_server, browser):
    port = free_port()
    client_id, secret = auth_server.register_client([f"http://127.0.0.1:{port}/callback"])
    process = BrokerProcess(broker_config(provider_config(auth_server, client_id), apps=APPS) + RESOURCE_SERVERS,
                            env={"DOT_CLIENT_SECRET": secret, "ORDERS_SECRET": SECRET}, port=port)
    yield process
    process.stop()


def test_requests_oauth2client_binds_its_token_from_the_metadata_alone(broker, browser):
    browser.allow(broker.host)
    metadata = requests.get(broker.url("/.well-known/oauth-authorization-server/providers/dot"), timeout=10).json()
    assert "ES256" in metadata["dpop_signing_alg_values_supported"]
    client = OAuth2Client(token_endpoint=metadata["token_endpoint"], authorization_endpoint=metadata["authorization_endpoint"],
                          revocation_endpoint=metadata["revocation_endpoint"], client_id="web", redirect_uri=REDIRECT_URI,
                          issuer=metadata["issuer"], authorization_response_iss_parameter_supported=True, testing=True,
                          dpop_bound_access_tokens=True, dpop_alg=metadata["dpop_signing_alg_values_supported"][0])
    request = client.authorization_request(scope="openid profile")
    location = browser.authorize(str(request.uri), "alice", "alice-password")
    token = client.authorization_code(request.validate_callback(location))
    assert isinstance(token, DPoPToken) and token.token_type == "DPoP"

    # The library proves its key on each call; the broker answers.
    session = requests.get(broker.url("/session"), auth=token, timeout=10)
    assert session.status_code == 200 and session.json()["provider"] == "dot", session.text
    current = requests.get(broker.url("/token"), auth=token, timeout=10)
    assert current.status_code == 200 and current.json()["access_token"]

    # Copied out of the app, the token alone is worth nothing.
    bearer = requests.get(broker.url("/session"), headers={"Authorization": f"Bearer {token.access_token}"}, timeout=10)
    assert bearer.status_code == 401 and bearer.headers["WWW-Authenticate"].startswith("DPoP ")
    stranger = Jwk.generate(alg="ES256")
    other = dpop_get(broker, "/session", token.access_token, stranger)
    assert other.status_code == 401 and other.json()["error"] == "invalid_dpop_proof"

    # A backend learns the binding.
    described = requests.post(broker.url("/introspect"), data={"token": token.access_token}, auth=("orders", SECRET), timeout=10).json()
    assert described["active"] and described["token_type"] == "DPoP"
    assert described["cnf"] == {"jkt": token.dpop_key.private_key.thumbprint()}

    # The refresh grant needs the same key (the library sends its proof); another key is refused.
    refreshed = client.refresh_token(token)
    assert isinstance(refreshed, DPoPToken) and refreshed.access_token == token.access_token
    foreign = requests.post(metadata["token_endpoint"], timeout=10,
                            data={"grant_type": "refresh_token", "refresh_token": token.refresh_token, "client_id": "web"},
                            headers={"DPoP": proof(stranger, "POST", metadata["token_endpoint"])})
    assert foreign.status_code == 400 and foreign.json()["error"] == "invalid_dpop_proof"
    assert "another key" in foreign.json()["error_description"]
    # Without a proof, the refusal says a proof is needed, and is counted so.
    bare = requests.post(metadata["token_endpoint"], timeout=10,
                         data={"grant_type": "refresh_token", "refresh_token": token.refresh_token, "client_id": "web"})
    assert bare.status_code == 400 and bare.json()["error"] == "invalid_dpop_proof"
    assert bare.json()["error_description"] == "A DPoP proof is required: send it in the DPoP header."
    metrics = requests.get(broker.url("/metrics"), timeout=10).text
    assert re.search(r'broker_rejected_requests_total\{route="[^"]*token",reason="dpop_proof_missing"\} 1\b', metrics), metrics

    # Revocation of a bound token needs a proof of its key too; then the session is gone.
    unproved = requests.post(metadata["revocation_endpoint"], data={"token": token.refresh_token, "client_id": "web"}, timeout=10)
    assert unproved.status_code == 400 and unproved.json()["error"] == "invalid_dpop_proof"
    assert requests.get(broker.url("/session"), auth=token, timeout=10).status_code == 200, "a refused revocation changes nothing"
    revoked = requests.post(metadata["revocation_endpoint"], data={"token": token.refresh_token, "client_id": "web"}, timeout=10,
                            headers={"DPoP": str(token.dpop_key.proof(htm="POST", htu=metadata["revocation_endpoint"]))})
    assert revoked.status_code == 200
    assert requests.get(broker.url("/session"), auth=token, timeout=10).status_code == 401


def test_the_broker_token_endpoint_binds_a_session_and_each_proof_is_used_once(broker, browser):
    app = App(broker, browser)
    key = Jwk.generate(alg="ES256")
    body = bound_login(app, key)
    assert body["session_token_type"] == "DPoP" and body["token_type"] == "Bearer", "the provider's token is a bearer token"
    token = body["session_token"]

    made = proof(key, "GET", broker.url("/token"), token=token)
    headers = {"Authorization": f"DPoP {token}", "DPoP": made}
    first = requests.get(broker.url("/token"), headers=headers, timeout=10)
    assert first.status_code == 200 and first.json()["access_token"] == body["access_token"]
    again = requests.get(broker.url("/token"), headers=headers, timeout=10)
    assert again.status_code == 401 and again.json()["error"] == "invalid_dpop_proof" and "used before" in again.json()["error_description"]
    assert app.call("GET", "/token").status_code == 401, "a bound token as a bearer token"

    for path, method in (("/profile", "GET"), ("/refresh", "POST")):
        answer = requests.request(method, broker.url(path), timeout=30, headers={
            "Authorization": f"DPoP {token}", "DPoP": proof(key, method, broker.url(path), token=token)})
        assert answer.status_code == 200, (path, answer.text)

    # An unbound session refuses the DPoP scheme, and stays usable as a bearer token.
    plain = App(broker, browser)
    plain.login("bob")
    assert dpop_get(broker, "/session", plain.session_token, key).status_code == 401
    assert plain.call("GET", "/session").status_code == 200

    revoke = proof(key, "POST", broker.url("/revoke"), token=token)
    assert app.call("POST", "/revoke").status_code == 401, "revoking a bound session needs its key"
    ended = requests.post(broker.url("/revoke"), headers={"Authorization": f"DPoP {token}", "DPoP": revoke}, timeout=30)
    assert ended.status_code == 200 and ended.json()["revoked"] is True
    assert dpop_get(broker, "/session", token, key).status_code == 401


def _bad_proofs(broker: BrokerProcess, token: str, key: Jwk) -> dict[str, tuple[dict, str]]:
    """Each wrong proof, and what the refusal says of it."""
    url = broker.url("/session")
    rsa = Jwk.generate(alg="RS256")
    short = Jwk.generate(alg="RS256", key_size=1024)
    hmac = str(Jwt.sign({"jti": "h", "htm": "GET", "htu": url, "iat": int(time.time()), "ath": _ath(token)},
                        key=Jwk.generate(alg="HS256"), alg="HS256", typ="dpop+jwt", extra_headers={"jwk": key.public_jwk().minimize()}))
    return {
        "wrong htm": ({"DPoP": proof(key, "POST", url, token=token)}, "htm"),
        "wrong htu": ({"DPoP": proof(key, "GET", broker.url("/token"), token=token)}, "htu"),
        "old iat": ({"DPoP": proof(key, "GET", url, token=token, iat=int(time.time()) - 600)}, "iat"),
        "future iat": ({"DPoP": proof(key, "GET", url, token=token, iat=int(time.time()) + 600)}, "iat"),
        "another key": ({"DPoP": proof(Jwk.generate(alg="ES256"), "GET", url, token=token)}, "another key"),
        "missing ath": ({"DPoP": proof(key, "GET", url)}, "ath"),
        "ath of another token": ({"DPoP": proof(key, "GET", url, token=token + "x")}, "ath"),
        "private key in the header": ({"DPoP": proof(key, "GET", url, token=token, headers={"jwk": dict(key)})}, "private member"),
        "a key of another type in the header": ({"DPoP": proof(key, "GET", url, token=token, headers={"jwk": rsa.public_jwk().minimize()})},
                                                "not a public key for ES256"),
        "a short RSA key": ({"DPoP": proof(short, "GET", url, token=token)}, "no usable key"),
        "wrong typ": ({"DPoP": proof(key, "GET", url, token=token, headers={"typ": "JWT"})}, "typ"),
        "alg none": ({"DPoP": _unsigned(key, url, token)}, "alg none is not accepted"),
        "HMAC": ({"DPoP": hmac}, "alg HS256 is not accepted"),
        "tampered signature": ({"DPoP": proof(key, "GET", url, token=token)[:-6] + "AAAAAA"}, "signature does not verify"),
        "not a JWT": ({"DPoP": "not-a-proof"}, "malformed"),
        "no proof": ({}, "required"),
    }


def _unsigned(key: Jwk, url: str, token: str) -> str:
    def enc(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    header = {"typ": "dpop+jwt", "alg": "none", "jwk": dict(key.public_jwk().minimize())}
    return f"{enc(header)}.{enc({'jti': 'n', 'htm': 'GET', 'htu': url, 'iat': int(time.time()), 'ath': _ath(token)})}."


def test_each_bad_proof_is_refused_and_changes_nothing(broker, browser):
    app = App(broker, browser)
    key = Jwk.generate(alg="ES256")
    token = bound_login(app, key)["session_token"]
    for case, (extra, reason) in _bad_proofs(broker, token, key).items():
        answer = requests.get(broker.url("/session"), headers={"Authorization": f"DPoP {token}", **extra}, timeout=10)
        assert answer.status_code == 401, (case, answer.text)
        assert answer.json()["error"] == "invalid_dpop_proof" and reason in answer.json()["error_description"], (case, answer.text)
        assert answer.headers["WWW-Authenticate"].startswith('DPoP error="invalid_dpop_proof"'), case
        assert token not in answer.text, case
    assert dpop_get(broker, "/session", token, key).status_code == 200, "the session is as it was"
    assert token not in "\n".join(broker.lines)
    # A token that names no session is refused as such: its proof is never looked at.
    unknown = requests.get(broker.url("/session"), timeout=10, headers={"Authorization": "DPoP tbs_" + "A" * 43, "DPoP": "not-a-proof"})
    assert unknown.status_code == 401 and unknown.json()["error"] == "invalid_token", unknown.text
    # ...and challenged in both schemes (RFC 9449 §7.2), Bearer first, as one that is no session
    # token: a DPoP challenge alone reads to requests-oauth2client as a demand for a nonce.
    malformed = requests.get(broker.url("/session"), timeout=10, headers={"Authorization": "DPoP not-a-session-token", "DPoP": "x"})
    for answer in (unknown, malformed):
        assert answer.status_code == 401, answer.text
        assert answer.headers["WWW-Authenticate"].startswith('Bearer error="invalid_token", DPoP error="invalid_token", algs="'), answer.headers


def _two_proofs(broker: BrokerProcess, method: str, path: str, fields: list[tuple[str, str]]) -> tuple[int, dict]:
    """A request with these header fields, sent as they are (two `DPoP` lines among them)."""
    connection = http.client.HTTPConnection("127.0.0.1", broker.port, timeout=10)
    body = b"" if method == "GET" else fields.pop()[1].encode()
    connection.putrequest(method, path, skip_accept_encoding=True)
    for name, value in fields:
        connection.putheader(name, value)
    if method != "GET":
        connection.putheader("Content-Type", "application/x-www-form-urlencoded")
        connection.putheader("Content-Length", str(len(body)))
    connection.endheaders(body or None)
    answer = connection.getresponse()
    result = answer.status, json.loads(answer.read())
    connection.close()
    return result


def test_an_incremental_code_of_a_bound_session_needs_a_proof_of_its_key(auth_server, browser, store_env):
    """The code an incremental authorization of a bound session ends with stands for that
    session: only a proof of its key redeems it. Refusals spend nothing, as a wrong verifier's."""
    port = free_port()
    client_id, secret = auth_server.register_client([f"http://127.0.0.1:{port}/callback"])
    broker = BrokerProcess(broker_config(provider_config(auth_server, client_id), apps=APPS),
                           env={"DOT_CLIENT_SECRET": secret, **store_env}, port=port)
    try:
        app = App(broker, browser)
        key = Jwk.generate(alg="ES256")
        token = bound_login(app, key)["session_token"]
        verifier, challenge = make_pkce()
        started = requests.post(broker.url("/authorize"), timeout=10, data={
            "scope": "write", "redirect_uri": app.redirect_uri, "code_challenge": challenge,
            "code_challenge_method": "S256", "state": "more",
        }, headers={"Authorization": f"DPoP {token}", "DPoP": proof(key, "POST", broker.url("/authorize"), token=token)})
        assert started.status_code == 200, started.text
        code = query_params(browser.authorize(started.json()["authorization_url"], "alice", "alice-password"))["code"]
        form = {"grant_type": "authorization_code", "code": code, "code_verifier": verifier,
                "redirect_uri": app.redirect_uri, "app": app.app}
        other = Jwk.generate(alg="ES256")
        for headers in ({}, {"DPoP": proof(other, "POST", broker.url("/token"))}):
            refused = requests.post(broker.url("/token"), data=form, headers=headers, timeout=10)
            assert refused.status_code == 400 and refused.json()["error"] == "invalid_dpop_proof", refused.text
            assert "access_token" not in refused.json()
        # The standard token endpoint would answer the session's own token, which the code does
        # not carry: refused before the code is spent, so that POST /token still redeems it.
        standard = broker.url("/providers/dot/token")
        at_issuer = requests.post(standard, timeout=10, headers={"DPoP": proof(key, "POST", standard)}, data={
            "grant_type": "authorization_code", "code": code, "code_verifier": verifier,
            "redirect_uri": app.redirect_uri, "client_id": app.app})
        assert at_issuer.status_code == 400 and at_issuer.json()["error"] == "invalid_grant", at_issuer.text
        assert "POST /token" in at_issuer.json()["error_description"]
        redeemed = requests.post(broker.url("/token"), data=form, timeout=10, headers={"DPoP": proof(key, "POST", broker.url("/token"))})
        assert redeemed.status_code == 200, redeemed.text
        assert "session_token" not in redeemed.json() and "write" in redeemed.json()["scope"].split()
        assert dpop_get(broker, "/session", token, key).status_code == 200, "the session goes on"
        refusals = [line for line in broker.json_lines() if line.get("audit") == "handoff_code.refused"]
        assert [line.get("reason") for line in refusals] == ["wrong_key", "wrong_key", "bound_session_at_issuer"], refusals
    finally:
        broker.stop()


def test_a_request_with_two_proofs_is_refused(broker, browser):
    """RFC 9449 §4.3: not more than one DPoP header field — even when the first one is good."""
    app = App(broker, browser)
    key, other = Jwk.generate(alg="ES256"), Jwk.generate(alg="ES256")
    token = bound_login(app, key)["session_token"]
    url = broker.url("/session")
    status, body = _two_proofs(broker, "GET", "/session", [
        ("Authorization", f"DPoP {token}"), ("DPoP", proof(key, "GET", url, token=token)), ("DPoP", proof(other, "GET", url, token=token))])
    assert status == 401 and body["error"] == "invalid_dpop_proof" and "more than one DPoP header" in body["error_description"], body
    assert dpop_get(broker, "/session", token, key).status_code == 200, "the session is as it was"
    empty = requests.get(url, headers={"Authorization": f"DPoP {token}", "DPoP": ""}, timeout=10)
    assert empty.status_code == 401 and "more than one" not in empty.json()["error_description"], empty.text
    params, verifier = app.sign_in("alice")
    form = f"grant_type=authorization_code&code={params['code']}&code_verifier={verifier}&redirect_uri={app.redirect_uri}&app=web"
    token_url = broker.url("/token")
    status, body = _two_proofs(broker, "POST", "/token", [("DPoP", proof(key, "POST", token_url)), ("DPoP", proof(key, "POST", token_url)),
                                                          ("body", form)])
    assert status == 400 and body["error"] == "invalid_dpop_proof" and "more than one DPoP header" in body["error_description"], body


@pytest.mark.parametrize("alg", ["ES256", "ES384", "RS256", "PS256", "EdDSA"])
def test_every_listed_algorithm_binds_a_session(broker, browser, alg):
    app = App(broker, browser)
    key = Jwk.generate(alg=alg, crv="Ed25519") if alg == "EdDSA" else Jwk.generate(alg=alg)
    token = bound_login(app, key)["session_token"]
    assert dpop_get(broker, "/session", token, key).status_code == 200


def test_an_app_that_requires_dpop_gets_no_bearer_session(broker, browser):
    app = App(broker, browser, app="bound")
    params, verifier = app.sign_in("alice")
    refused = app.redeem(params["code"], verifier)
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_dpop_proof"
    assert "bound" in refused.json()["error_description"]
    # The code was not spent by the refusal: the same code with a proof redeems it.
    key = Jwk.generate(alg="ES256")
    answer = requests.post(broker.url("/token"), timeout=30, headers={"DPoP": proof(key, "POST", broker.url("/token"))},
                           data={"grant_type": "authorization_code", "code": params["code"], "code_verifier": verifier,
                                 "redirect_uri": app.redirect_uri, "app": "bound"})
    assert answer.status_code == 200 and answer.json()["session_token_type"] == "DPoP", answer.text


def test_an_app_that_asks_for_nonces_gets_them_and_requests_oauth2client_follows(broker, browser):
    browser.allow(broker.host)
    metadata = requests.get(broker.url("/.well-known/oauth-authorization-server/providers/dot"), timeout=10).json()
    client = OAuth2Client(token_endpoint=metadata["token_endpoint"], authorization_endpoint=metadata["authorization_endpoint"],
                          client_id="nonced", redirect_uri=REDIRECT_URI, testing=True, dpop_bound_access_tokens=True)
    request = client.authorization_request(scope="openid")
    location = browser.authorize(str(request.uri), "alice", "alice-password")
    # The token request without a nonce is answered use_dpop_nonce with one; the library retries with it.
    token = client.authorization_code(request.validate_callback(location))
    assert isinstance(token, DPoPToken)
    assert token.dpop_key.as_nonce, "the broker gave the library a nonce at the token endpoint"
    # The same at the broker's resources: a 401 use_dpop_nonce with the nonce, then the library's retry.
    session = requests.get(broker.url("/session"), auth=token, timeout=10)
    assert session.status_code == 200, session.text
    assert token.dpop_key.rs_nonce == token.dpop_key.as_nonce, "one nonce for every endpoint of an instance"

    # By hand: no nonce, a made-up one, then the one given.
    key = token.dpop_key.private_key
    bare = requests.get(broker.url("/session"), timeout=10, headers={
        "Authorization": f"DPoP {token.access_token}", "DPoP": proof(key, "GET", broker.url("/session"), token=token.access_token)})
    assert bare.status_code == 401 and bare.json()["error"] == "use_dpop_nonce"
    assert bare.headers["WWW-Authenticate"].startswith('DPoP error="use_dpop_nonce"')
    nonce = bare.headers["DPoP-Nonce"]
    made_up = requests.get(broker.url("/session"), timeout=10, headers={
        "Authorization": f"DPoP {token.access_token}",
        "DPoP": proof(key, "GET", broker.url("/session"), token=token.access_token, nonce="made-up")})
    assert made_up.status_code == 401 and made_up.json()["error"] == "use_dpop_nonce"
    given = requests.get(broker.url("/session"), timeout=10, headers={
        "Authorization": f"DPoP {token.access_token}",
        "DPoP": proof(key, "GET", broker.url("/session"), token=token.access_token, nonce=nonce)})
    assert given.status_code == 200, given.text
    metrics = requests.get(broker.url("/metrics"), timeout=10).text
    assert 'reason="dpop_nonce_required"' in metrics


def test_a_token_request_proof_is_checked_like_any_other(broker, browser):
    app = App(broker, browser)
    params, verifier = app.sign_in("alice")
    key = Jwk.generate(alg="ES256")
    form = {"grant_type": "authorization_code", "code": params["code"], "code_verifier": verifier,
            "redirect_uri": app.redirect_uri, "app": "web"}
    wrong = requests.post(broker.url("/token"), data=form, headers={"DPoP": proof(key, "POST", broker.url("/session"))}, timeout=30)
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_dpop_proof"
    assert requests.post(broker.url("/token"), data=form, headers={"DPoP": proof(key, "POST", broker.url("/token"))},
                         timeout=30).status_code == 200, "the refused request spent nothing"


def test_the_binding_outlives_a_restart(auth_server, browser, tmp_path):
    port = free_port()
    client_id, secret = auth_server.register_client([f"http://127.0.0.1:{port}/callback"])
    config = broker_config(provider_config(auth_server, client_id))
    env = {"DOT_CLIENT_SECRET": secret}
    state = str(tmp_path / "state")
    first = BrokerProcess(config, env=env, port=port, state_dir=state)
    key = Jwk.generate(alg="ES256")
    try:
        token = bound_login(App(first, browser), key)["session_token"]
    finally:
        first.stop()
    second = BrokerProcess(config, env=env, port=port, state_dir=state)
    try:
        assert dpop_get(second, "/session", token, key).status_code == 200
        assert requests.get(second.url("/session"), headers={"Authorization": f"Bearer {token}"}, timeout=10).status_code == 401
    finally:
        second.stop()


def test_a_proof_is_accepted_once_across_instances_sharing_postgres(auth_server, browser):
    with PostgresCluster() as postgres:
        ports = [free_port(), free_port()]
        public = f"http://127.0.0.1:{ports[0]}"
        client_id, secret = auth_server.register_client([f"{public}/callback"])
        env = {"DOT_CLIENT_SECRET": secret, "BROKER_STATE_BACKEND": "postgres", "BROKER_POSTGRES_URL": postgres.create_database(),
               "BROKER_POSTGRES_PASSWORD": postgres.password, "BROKER_PUBLIC_URL": public}
        brokers = [BrokerProcess(broker_config(provider_config(auth_server, client_id)), env=env, port=port) for port in ports]
        try:
            key = Jwk.generate(alg="ES256")
            token = bound_login(App(brokers[0], browser), key)["session_token"]
            # Behind one public URL, a proof names it whichever instance takes the request.
            made = proof(key, "GET", f"{public}/token", token=token)
            headers = {"Authorization": f"DPoP {token}", "DPoP": made}
            assert requests.get(brokers[1].url("/token"), headers=headers, timeout=10).status_code == 200
            replayed = requests.get(brokers[0].url("/token"), headers=headers, timeout=10)
            assert replayed.status_code == 401 and "used before" in replayed.json()["error_description"]
            assert requests.get(brokers[1].url("/token"), headers={"Authorization": f"Bearer {token}"}, timeout=10).status_code == 401
            for broker in brokers:
                fresh = requests.get(broker.url("/session"), timeout=10, headers={
                    "Authorization": f"DPoP {token}", "DPoP": proof(key, "GET", f"{public}/session", token=token)})
                assert fresh.status_code == 200, fresh.text
            # A token no instance knows, looked up in the store, is challenged in its own scheme.
            for path in ("/token", "/session"):
                unknown = requests.get(brokers[1].url(path), timeout=10, headers={"Authorization": "DPoP tbs_" + "A" * 43, "DPoP": "x"})
                assert unknown.status_code == 401 and unknown.json()["error"] == "invalid_token", unknown.text
                assert unknown.headers["WWW-Authenticate"].startswith('Bearer error="invalid_token", DPoP error="invalid_token"'), \
                    (path, unknown.headers)
        finally:
            for broker in brokers:
                broker.stop()
