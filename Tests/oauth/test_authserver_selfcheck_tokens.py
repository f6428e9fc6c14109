"""Self-check of the OAuth test infrastructure, with no broker: the loopback authorization
server's refresh, revocation and test hooks, driven by hand like an OAuth client would (its
discovery, code flow and the scripted browser: test_authserver_selfcheck_flow.py)."""

import concurrent.futures
import time

import pytest
import requests

from support.authserver_client import REDIRECT_URI, get_tokens, refresh, userinfo
from support.broker import wait_for


@pytest.fixture
def client(auth_server):
    client_id, secret = auth_server.register_client(redirect_uris=[REDIRECT_URI])
    return client_id, secret


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
    assert wait_for(lambda: not auth_server.token_active(tokens["access_token"]), timeout=15), "the 2 s token never expired"
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
