"""The OAuth client side of the authorization server's self-check (test_authserver_selfcheck_*.py):
the authorization URL, token requests, the whole code flow by hand, refresh and userinfo."""

import secrets
from urllib.parse import urlencode

import requests

from support.browser import query_params
from support.pkce import make_pkce


REDIRECT_URI = "http://127.0.0.1:9/cb"  # port 9 (discard): nothing listens, the browser must not go there
SCOPE = "openid profile email read"


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
