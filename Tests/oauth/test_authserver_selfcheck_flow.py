"""Self-check of the OAuth test infrastructure, with no broker: the loopback authorization
server's discovery and code flow, and the scripted browser, driven by hand like an OAuth client
would (its tokens' refresh, revocation and test hooks: test_authserver_selfcheck_tokens.py)."""

import json
import secrets
import time
from urllib.parse import urlencode

import pytest
import requests
from jwcrypto import jwk, jwt

from support.authserver_client import (
    REDIRECT_URI, SCOPE, authorize_url, get_tokens, refresh, token_request, userinfo,
)
from support.browser import Browser, BrowserError, parse_forms, query_params
from support.pkce import make_pkce


@pytest.fixture
def client(auth_server):
    client_id, secret = auth_server.register_client(redirect_uris=[REDIRECT_URI])
    return client_id, secret



# --------------------------------------------------------------------------------- discovery


def test_discovery_document_and_jwks(auth_server):
    doc = requests.get(auth_server.discovery_url, timeout=10).json()
    assert doc["issuer"] == auth_server.issuer == f"http://127.0.0.1:{auth_server.port}/o"
    assert doc["authorization_endpoint"] == auth_server.authorization_endpoint
    assert doc["token_endpoint"] == auth_server.token_endpoint
    assert doc["userinfo_endpoint"] == auth_server.userinfo_endpoint
    assert doc["jwks_uri"] == auth_server.jwks_uri
    assert doc["revocation_endpoint"] == auth_server.revocation_endpoint
    assert "RS256" in doc["id_token_signing_alg_values_supported"]
    assert "S256" in doc["code_challenge_methods_supported"]
    assert {"client_secret_basic", "client_secret_post"} <= set(doc["token_endpoint_auth_methods_supported"])
    assert {"sub", "name", "email", "email_verified", "preferred_username"} <= set(doc["claims_supported"])
    keys = auth_server.jwks()["keys"]
    assert len(keys) == 1 and keys[0]["kty"] == "RSA" and keys[0]["alg"] == "RS256" and keys[0]["kid"]


# --------------------------------------------------------------------------------- code flow


def test_code_flow_with_pkce_id_token_and_userinfo(auth_server, browser, client):
    client_id, _ = client
    nonce = secrets.token_urlsafe(12)
    tokens = get_tokens(auth_server, browser, client, nonce=nonce)
    assert tokens["token_type"] == "Bearer"
    assert tokens["expires_in"] == auth_server.initial_access_token_lifetime  # 3600 by default
    assert set(tokens["scope"].split()) == set(SCOPE.split())
    assert tokens["access_token"] and tokens["refresh_token"]

    # The ID token verifies against the published JWKS.
    keyset = jwk.JWKSet.from_json(requests.get(auth_server.jwks_uri, timeout=10).text)
    id_token = jwt.JWT(jwt=tokens["id_token"], key=keyset, algs=["RS256"], expected_type="JWS")
    header = json.loads(id_token.header)
    claims = json.loads(id_token.claims)
    assert header["alg"] == "RS256"
    assert header["kid"] == auth_server.jwks()["keys"][0]["kid"]
    alice = auth_server.users["alice"]
    assert claims["iss"] == auth_server.issuer
    assert claims["aud"] == client_id
    assert claims["sub"] == alice.sub
    assert claims["nonce"] == nonce
    assert claims["exp"] > time.time() > claims["iat"] - 5
    assert claims["email"] == "alice@example.test" and claims["email_verified"] is True
    assert claims["name"] == "Alice Liddell" and claims["preferred_username"] == "alice"

    # A tampered ID token does not verify.
    head, payload, sig = tokens["id_token"].split(".")
    forged = ".".join([head, payload, sig[:-4] + ("AAAA" if sig[-4:] != "AAAA" else "BBBB")])
    with pytest.raises(Exception):
        jwt.JWT(jwt=forged, key=keyset, algs=["RS256"])

    r = userinfo(auth_server, tokens["access_token"])
    assert r.status_code == 200, r.text
    assert r.json() == {
        "sub": alice.sub,
        "name": "Alice Liddell",
        "preferred_username": "alice",
        "email": "alice@example.test",
        "email_verified": True,
    }


def test_userinfo_claims_follow_scopes_and_user(auth_server, browser, client):
    tokens = get_tokens(auth_server, browser, client, user="bob", scope="openid email")
    info = userinfo(auth_server, tokens["access_token"]).json()
    assert info == {"sub": auth_server.users["bob"].sub, "email": "bob@example.test", "email_verified": False}


def test_client_secret_post_and_wrong_secret(auth_server, browser, client):
    client_id, secret = client
    tokens = get_tokens(auth_server, browser, client)
    r = refresh(auth_server, client, tokens["refresh_token"], auth="post")
    assert r.status_code == 200, r.text
    r = refresh(auth_server, (client_id, "wrong"), r.json()["refresh_token"])
    assert r.status_code == 401 and r.json()["error"] == "invalid_client"


def test_pkce_is_required_and_checked(auth_server, browser, client):
    client_id, secret = client
    # No code_challenge: the server refuses the authorization request.
    url = f"{auth_server.authorization_endpoint}?" + urlencode(
        {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT_URI, "scope": "read", "state": "s"}
    )
    location = browser.authorize(url, "alice", "alice-password")
    params = query_params(location)
    assert params["error"] == "invalid_request" and params["state"] == "s", location

    # "plain" is refused too (S256 only).
    location = browser.authorize(
        authorize_url(auth_server, client_id, "x" * 43, "s2", code_challenge_method="plain"), "alice", "alice-password"
    )
    assert query_params(location)["error"] == "invalid_request", location

    # Wrong verifier at the token endpoint: invalid_grant.
    verifier, challenge = make_pkce()
    location = browser.authorize(authorize_url(auth_server, client_id, challenge, "s3"), "alice", "alice-password")
    code = query_params(location)["code"]
    r = token_request(
        auth_server,
        client_id,
        secret,
        {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI, "code_verifier": "w" * 50},
    )
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant", r.text


def test_code_is_single_use(auth_server, browser, client):
    client_id, secret = client
    verifier, challenge = make_pkce()
    code = query_params(browser.authorize(authorize_url(auth_server, client_id, challenge, "s"), "alice", "alice-password"))["code"]
    data = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI, "code_verifier": verifier}
    assert token_request(auth_server, client_id, secret, data).status_code == 200
    r = token_request(auth_server, client_id, secret, data)
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"



# --------------------------------------------------------------------------------- browser


def test_consent_denied_yields_access_denied(auth_server, browser, client):
    client_id, _ = client
    _, challenge = make_pkce()
    location = browser.authorize(authorize_url(auth_server, client_id, challenge, "st-1"), "alice", "alice-password", consent=False)
    assert location.startswith(REDIRECT_URI + "?")
    params = query_params(location)
    assert params["error"] == "access_denied" and params["state"] == "st-1"
    assert "code" not in params


def test_browser_keeps_login_and_skip_authorization(auth_server, browser):
    client_id, _ = auth_server.register_client(redirect_uris=[REDIRECT_URI], skip_authorization=True)
    _, challenge = make_pkce()
    # First time: login form, no consent page (skip_authorization).
    location = browser.authorize(authorize_url(auth_server, client_id, challenge, "a"), "alice", "alice-password")
    assert "code" in query_params(location)
    assert [m for m, _, _ in browser.history].count("POST") == 1
    # Second time: the session cookie logs alice in; no credentials needed, no form at all.
    location = browser.authorize(authorize_url(auth_server, client_id, challenge, "b"))
    assert query_params(location)["state"] == "b" and "code" in query_params(location)
    assert all(m == "GET" for m, _, _ in browser.history)


def test_prompt_none(auth_server, browser, client):
    client_id, _ = client
    _, challenge = make_pkce()

    def silent(state, scope=SCOPE, app=client_id):
        url = authorize_url(auth_server, app, challenge, state, prompt="none", scope=scope)
        params = query_params(browser.authorize(url))  # no credentials: must never show a form
        assert params["state"] == state
        return params

    assert silent("p1")["error"] == "login_required"  # not logged in
    other_id, _ = auth_server.register_client(redirect_uris=[REDIRECT_URI])
    get_tokens(auth_server, browser, client)  # logs in, consents, holds a token
    assert "code" in silent("p2")  # live token for these scopes: code issued without UI
    assert silent("p3", scope=SCOPE + " write")["error"] == "consent_required"  # wider scopes
    assert silent("p4", app=other_id)["error"] == "consent_required"  # never consented to this app


def test_browser_errors(auth_server, browser, client):
    client_id, _ = client
    _, challenge = make_pkce()
    with pytest.raises(BrowserError, match="rejected"):
        browser.authorize(authorize_url(auth_server, client_id, challenge, "s"), "alice", "wrong-password")
    # An unregistered redirect_uri is an error page at the server, never a redirect.
    url = authorize_url(auth_server, client_id, challenge, "s").replace("%3A9%2Fcb", "%3A9%2Fevil")
    with pytest.raises(BrowserError) as info:
        browser.authorize(url, "alice", "alice-password")
    assert info.value.response is not None and info.value.response.status_code == 400


def test_browser_follows_only_allowed_hosts(auth_server):
    # The start URL's host is trusted; the login redirect stays on it; an outside host is returned.
    b = Browser(allowed_hosts=[])
    assert b.get_location(f"{auth_server.base_url}/o/authorize/?x=1").startswith(f"{auth_server.base_url}/accounts/login/")
    assert b.is_allowed(auth_server.base_url) is False
    b.allow(auth_server.host)
    assert b.is_allowed(auth_server.base_url + "/anything") and not b.is_allowed("myapp://cb")
    assert not b.is_allowed("http://127.0.0.1:9/cb")
    forms = parse_forms(requests.get(auth_server.login_url, timeout=10).text)
    assert forms[0].id == "login-form" and forms[0].has_field("password", "password")
