"""Self-check of the OAuth test infrastructure, with no broker: the loopback authorization
server, its test hooks and the scripted browser, driven by hand like an OAuth client would."""

import concurrent.futures
import json
import secrets
import time
from urllib.parse import urlencode

import pytest
import requests
from jwcrypto import jwk, jwt

from support.browser import Browser, BrowserError, parse_forms, query_params
from support.pkce import make_pkce

REDIRECT_URI = "http://127.0.0.1:9/cb"  # port 9 (discard): nothing listens, the browser must not go there
SCOPE = "openid profile email read"


@pytest.fixture
def client(auth_server):
    client_id, secret = auth_server.register_client(redirect_uris=[REDIRECT_URI])
    return client_id, secret


def authorize_url(server, client_id, challenge, state, nonce="n-0S6_WzA2Mj", scope=SCOPE, **extra):
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT_URI,
        "scope": scope,
        "state": state,
        "nonce": nonce,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        **extra,
    }
    return f"{server.authorization_endpoint}?{urlencode(params)}"


def token_request(server, client_id, secret, data, auth="basic"):
    if auth == "basic":
        return requests.post(server.token_endpoint, data=data, auth=(client_id, secret), timeout=10)
    return requests.post(
        server.token_endpoint, data={**data, "client_id": client_id, "client_secret": secret}, timeout=10
    )


def get_tokens(server, browser, client, user="alice", scope=SCOPE, nonce="n-0S6_WzA2Mj"):
    """Run the whole authorization-code + PKCE flow; return the token response JSON."""
    client_id, secret = client
    verifier, challenge = make_pkce()
    state = secrets.token_urlsafe(16)
    location = browser.authorize(
        authorize_url(server, client_id, challenge, state, nonce=nonce, scope=scope),
        user,
        server.users[user].password,
        consent=True,
    )
    assert location.startswith(REDIRECT_URI + "?"), location
    params = query_params(location)
    assert params["state"] == state
    r = token_request(
        server,
        client_id,
        secret,
        {
            "grant_type": "authorization_code",
            "code": params["code"],
            "redirect_uri": REDIRECT_URI,
            "code_verifier": verifier,
        },
    )
    assert r.status_code == 200, r.text
    return r.json()


def refresh(server, client, refresh_token, auth="basic"):
    client_id, secret = client
    return token_request(
        server, client_id, secret, {"grant_type": "refresh_token", "refresh_token": refresh_token}, auth=auth
    )


def userinfo(server, access_token):
    return requests.get(server.userinfo_endpoint, headers={"Authorization": f"Bearer {access_token}"}, timeout=10)


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


# --------------------------------------------------------------------------------- refresh


def test_refresh_rotates_and_old_refresh_token_fails(auth_server, browser, client):
    tokens = get_tokens(auth_server, browser, client)
    r = refresh(auth_server, client, tokens["refresh_token"])
    assert r.status_code == 200, r.text
    new = r.json()
    assert new["access_token"] != tokens["access_token"]
    assert new["refresh_token"] != tokens["refresh_token"]
    assert "id_token" in new  # openid scope: a fresh ID token on refresh too
    assert auth_server.token_active(new["access_token"]) and auth_server.token_active(new["refresh_token"])
    assert not auth_server.token_active(tokens["access_token"])
    assert not auth_server.token_active(tokens["refresh_token"])

    r = refresh(auth_server, client, tokens["refresh_token"])
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant", r.text
    # Reuse protection: replaying a rotated refresh token revokes the whole family.
    assert not auth_server.token_active(new["refresh_token"])
    r = refresh(auth_server, client, new["refresh_token"])
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"


def test_access_token_lifetime_is_settable_at_run_time(auth_server, browser, client):
    auth_server.set_access_token_lifetime(2)
    assert auth_server.access_token_lifetime == 2
    tokens = get_tokens(auth_server, browser, client)
    assert tokens["expires_in"] == 2
    assert userinfo(auth_server, tokens["access_token"]).status_code == 200
    time.sleep(2.2)
    assert not auth_server.token_active(tokens["access_token"])
    assert userinfo(auth_server, tokens["access_token"]).status_code == 401
    r = refresh(auth_server, client, tokens["refresh_token"])
    assert r.status_code == 200 and r.json()["expires_in"] == 2
    auth_server.reset_config()
    assert auth_server.access_token_lifetime == auth_server.initial_access_token_lifetime


def test_expire_access_token(auth_server, browser, client):
    tokens = get_tokens(auth_server, browser, client)
    auth_server.expire_access_token(tokens["access_token"])
    assert not auth_server.token_active(tokens["access_token"])
    assert userinfo(auth_server, tokens["access_token"]).status_code == 401
    assert auth_server.token_active(tokens["refresh_token"])


# --------------------------------------------------------------------------------- revocation


def test_rfc7009_revocation(auth_server, browser, client):
    client_id, secret = client
    tokens = get_tokens(auth_server, browser, client)
    assert auth_server.token_active(tokens["access_token"])
    r = requests.post(
        auth_server.revocation_endpoint,
        data={"token": tokens["access_token"], "token_type_hint": "access_token"},
        auth=(client_id, secret),
        timeout=10,
    )
    assert r.status_code == 200, r.text
    assert not auth_server.token_active(tokens["access_token"])
    assert userinfo(auth_server, tokens["access_token"]).status_code == 401

    r = requests.post(
        auth_server.revocation_endpoint, data={"token": tokens["refresh_token"]}, auth=(client_id, secret), timeout=10
    )
    assert r.status_code == 200, r.text
    assert not auth_server.token_active(tokens["refresh_token"])
    r = refresh(auth_server, client, tokens["refresh_token"])
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"

    # Revoking an unknown token is not an error (RFC 7009 2.2).
    r = requests.post(auth_server.revocation_endpoint, data={"token": "nope"}, auth=(client_id, secret), timeout=10)
    assert r.status_code == 200


def test_revoke_user_kills_tokens(auth_server, browser, client):
    alice = get_tokens(auth_server, browser, client, user="alice")
    browser.clear_cookies()
    bob = get_tokens(auth_server, browser, client, user="bob")
    result = auth_server.revoke_user("alice")
    assert result["refresh_tokens"] >= 1 and result["access_tokens"] >= 1
    assert not auth_server.token_active(alice["refresh_token"])
    assert not auth_server.token_active(alice["access_token"])
    r = refresh(auth_server, client, alice["refresh_token"])
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"
    assert userinfo(auth_server, alice["access_token"]).status_code == 401
    # Other users are untouched.
    assert auth_server.token_active(bob["refresh_token"])
    assert refresh(auth_server, client, bob["refresh_token"]).status_code == 200


def test_token_status_unknown_token(auth_server):
    assert auth_server.token_status("not-a-token") == {"active": False, "token_type": None}


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


# --------------------------------------------------------------------------------- test hooks


def test_stats_count_token_requests_by_grant_type(auth_server, browser, client):
    auth_server.reset_stats()
    assert auth_server.stats() == {}
    tokens = get_tokens(auth_server, browser, client)
    rt = tokens["refresh_token"]
    for _ in range(2):
        r = refresh(auth_server, client, rt)
        rt = r.json()["refresh_token"]
    userinfo(auth_server, r.json()["access_token"])
    assert auth_server.stats() == {"authorization_code": 1, "refresh_token": 2}
    endpoints = auth_server.endpoint_stats()
    assert endpoints["token"] == 3 and endpoints["userinfo"] == 1 and endpoints["authorize"] >= 2
    auth_server.reset_stats()
    assert auth_server.stats() == {} and auth_server.endpoint_stats() == {}


def test_fault_injection_on_token_endpoint(auth_server, browser, client):
    tokens = get_tokens(auth_server, browser, client)
    auth_server.reset_stats()
    auth_server.inject_fault("token", status=503, body='{"error":"temporarily_unavailable"}', count=1)
    r = refresh(auth_server, client, tokens["refresh_token"])
    assert r.status_code == 503
    auth_server.inject_fault("token", delay=0.3, count=1)
    t0 = time.monotonic()
    r = refresh(auth_server, client, tokens["refresh_token"])  # the failed call did not consume it
    assert r.status_code == 200 and time.monotonic() - t0 >= 0.3
    assert auth_server.stats() == {"refresh_token": 2}
    auth_server.inject_fault("userinfo", status=200, body="garbage", content_type="text/plain", count=None)
    assert userinfo(auth_server, r.json()["access_token"]).text == "garbage"
    assert userinfo(auth_server, r.json()["access_token"]).text == "garbage"
    auth_server.clear_faults()
    assert userinfo(auth_server, r.json()["access_token"]).json()["sub"] == auth_server.users["alice"].sub


def test_concurrent_refreshes_are_counted_and_strictly_rotated(auth_server, browser, client):
    """N clients racing on one refresh token: every request is counted and answered. The server
    serialises token requests, so exactly one wins; the others are reuses of a rotated token
    (invalid_grant), and reuse protection then revokes the winner's new refresh token as well --
    which is why a broker must single-flight its refreshes."""
    tokens = get_tokens(auth_server, browser, client)
    auth_server.reset_stats()
    n = 8
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        results = list(pool.map(lambda _: refresh(auth_server, client, tokens["refresh_token"]), range(n)))
    codes = [r.status_code for r in results]
    assert sorted(codes) == [200] + [400] * (n - 1), [(r.status_code, r.text[:300]) for r in results]
    assert all(r.json()["error"] == "invalid_grant" for r in results if r.status_code == 400)
    assert auth_server.stats() == {"refresh_token": n}
    winner = next(r.json() for r in results if r.status_code == 200)
    assert not auth_server.token_active(winner["refresh_token"])


def test_single_refresh_under_delay_is_counted_once(auth_server, browser, client):
    """What a broker test does: slow the token endpoint down, fire one refresh, count it."""
    tokens = get_tokens(auth_server, browser, client)
    auth_server.reset_stats()
    auth_server.inject_fault("token", delay=0.2, count=None)
    r = refresh(auth_server, client, tokens["refresh_token"])
    assert r.status_code == 200
    assert auth_server.stats() == {"refresh_token": 1}
    assert auth_server.token_active(r.json()["refresh_token"])
