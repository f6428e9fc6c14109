"""Self-check of the ID-token tampering proxy (support/tamper_proxy.py), with no broker: a manual
authorization-code + PKCE flow signs in at the real server, and the code is exchanged THROUGH
the proxy, whose ID token must then carry exactly the defect its mode promises. Also checks the
auth server's /test/user_tokens hook (refresh-token rotation seen from the server side)."""

import json
import secrets
import time
from urllib.parse import urlencode

import pytest
import requests
from jwcrypto import jwk, jws, jwt

from support.authserver import AuthServerError
from support.pkce import make_pkce
from support.browser import query_params
from support.tamper_proxy import PROXY_KID, TamperProxy, decode_jwt_unverified

REDIRECT_URI = "http://127.0.0.1:9/callback"  # like the broker's /callback; nothing listens on port 9
SCOPE = "openid profile email"


@pytest.fixture
def client(auth_server):
    return auth_server.register_client(redirect_uris=[REDIRECT_URI])


def sign_in(proxy, browser, client_id, nonce, user="alice"):
    """Authorize at the endpoint the PROXY's discovery document names (the real server);
    returns (code, verifier)."""
    doc = requests.get(proxy.discovery_url, timeout=10).json()
    verifier, challenge = make_pkce()
    state = secrets.token_urlsafe(12)
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT_URI,
        "scope": SCOPE,
        "state": state,
        "nonce": nonce,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    password = proxy.auth_server.users[user].password
    location = browser.authorize(f"{doc['authorization_endpoint']}?{urlencode(params)}", user, password)
    assert location.startswith(REDIRECT_URI + "?"), location
    got = query_params(location)
    assert got["state"] == state
    return got["code"], verifier


def exchange(proxy, client, code, verifier, auth="basic"):
    client_id, secret = client
    data = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI, "code_verifier": verifier}
    if auth == "basic":
        return requests.post(proxy.token_endpoint, data=data, auth=(client_id, secret), timeout=10)
    return requests.post(
        proxy.token_endpoint, data={**data, "client_id": client_id, "client_secret": secret}, timeout=10
    )


def tokens_through_proxy(proxy, browser, client, nonce, auth="basic"):
    code, verifier = sign_in(proxy, browser, client[0], nonce)
    r = exchange(proxy, client, code, verifier, auth=auth)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("application/json")
    assert "no-store" in r.headers.get("Cache-Control", "")
    return r.json()


def proxy_keyset(proxy):
    return jwk.JWKSet.from_json(requests.get(proxy.jwks_uri, timeout=10).text)


def signature_ok(token, key, alg="RS256"):
    """Signature check only (no claim checks), as a relying party's first step."""
    try:
        s = jws.JWS()
        s.deserialize(token)
        s.verify(key, alg=alg)
        return True
    except Exception:
        return False


# --------------------------------------------------------------------------------- documents


def test_discovery_jwks_and_plain_404(auth_server, tamper_proxy):
    proxy = tamper_proxy
    assert proxy.issuer == f"http://127.0.0.1:{proxy.port}/o" != auth_server.issuer
    real = auth_server.discovery()
    doc = requests.get(proxy.discovery_url, timeout=10).json()
    assert doc["issuer"] == proxy.issuer
    assert doc["token_endpoint"] == proxy.token_endpoint == f"{proxy.issuer}/token/"
    assert doc["jwks_uri"] == proxy.jwks_uri == f"{proxy.issuer}/jwks/"
    for field in ("authorization_endpoint", "userinfo_endpoint", "revocation_endpoint"):
        assert doc[field] == real[field] and doc[field].startswith(auth_server.base_url)
    assert {k: v for k, v in doc.items() if k not in ("issuer", "token_endpoint", "jwks_uri")} == {
        k: v for k, v in real.items() if k not in ("issuer", "token_endpoint", "jwks_uri")
    }

    keys = requests.get(proxy.jwks_uri, timeout=10).json()["keys"]
    assert len(keys) == 1
    assert keys[0]["kid"] == PROXY_KID == "proxy-1" and keys[0]["kty"] == "RSA" and keys[0]["alg"] == "RS256"
    assert "d" not in keys[0]  # public only
    assert keys[0]["n"] not in {k["n"] for k in auth_server.jwks()["keys"]}
    assert proxy.jwks_requests == 1 and proxy.discovery_requests == 1 and proxy.token_requests == 0

    for path in ("/", "/o/userinfo/", "/o/authorize/", "/o/.well-known/jwks.json", "/x"):
        r = requests.get(proxy.base_url + path, timeout=10, allow_redirects=False)
        assert r.status_code == 404, path
    assert requests.get(proxy.token_endpoint, timeout=10).status_code == 405
    assert requests.post(proxy.base_url + "/nope", data={"a": "b"}, timeout=10).status_code == 404
    assert proxy.token_requests == 0

    with pytest.raises(ValueError):
        proxy.mode = "no_such_mode"
    proxy.reset_counts()
    assert proxy.jwks_requests == proxy.discovery_requests == 0


def test_each_proxy_has_its_own_key(auth_server):
    with TamperProxy(auth_server) as a, TamperProxy(auth_server, mode="alg_none") as b:
        assert a.port != b.port and b.mode == "alg_none"
        assert a.jwks()["keys"][0]["n"] != b.jwks()["keys"][0]["n"]
    assert not a.running
    with pytest.raises(requests.ConnectionError):
        requests.get(a.discovery_url, timeout=2)


# --------------------------------------------------------------------------------- valid mode


def test_valid_mode_verifies_with_proxy_issuer_and_jwks(auth_server, browser, client, tamper_proxy):
    proxy = tamper_proxy
    client_id, _ = client
    nonce = secrets.token_urlsafe(12)
    auth_server.reset_stats()
    tokens = tokens_through_proxy(proxy, browser, client, nonce)
    assert proxy.token_requests == 1
    assert auth_server.stats() == {"authorization_code": 1}

    # Verifies against the proxy's JWKS, with every standard check, as a relying party would.
    token = jwt.JWT(
        jwt=tokens["id_token"],
        key=proxy_keyset(proxy),
        algs=["RS256"],
        expected_type="JWS",
        check_claims={"iss": proxy.issuer, "aud": client_id, "exp": None, "nonce": nonce},
    )
    header, claims = json.loads(token.header), json.loads(token.claims)
    assert header == {"alg": "RS256", "typ": "JWT", "kid": "proxy-1"}
    alice = auth_server.users["alice"]
    assert claims["sub"] == alice.sub and claims["email"] == alice.email
    assert claims["iat"] - 5 < time.time() < claims["exp"]

    # ... and is the real server's token, but for `iss` (the proxy never touched anything else).
    upstream, sent = proxy.id_tokens[-1]
    assert sent == tokens["id_token"]
    _, real_claims = decode_jwt_unverified(upstream)
    assert real_claims["iss"] == auth_server.issuer
    assert {**real_claims, "iss": proxy.issuer} == claims
    # The real server's key does not verify it.
    assert not signature_ok(tokens["id_token"], jwk.JWKSet.from_json(json.dumps(auth_server.jwks())))

    # Access and refresh tokens pass through untouched and are live at the real server.
    assert auth_server.token_active(tokens["access_token"])
    assert auth_server.token_active(tokens["refresh_token"])
    bearer = {"Authorization": f"Bearer {tokens['access_token']}"}
    r = requests.get(auth_server.userinfo_endpoint, headers=bearer, timeout=10)
    assert r.status_code == 200 and r.json()["sub"] == alice.sub


def test_client_secret_post_and_errors_pass_through(auth_server, browser, client, tamper_proxy):
    proxy = tamper_proxy
    code, verifier = sign_in(proxy, browser, client[0], "n1")
    tokens = exchange(proxy, client, code, verifier, auth="post")
    assert tokens.status_code == 200 and tokens.json()["id_token"]

    # A replayed code: the real server's error, status and body, unchanged.
    r = exchange(proxy, client, code, verifier)
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"
    # Wrong client secret: 401 invalid_client from the real server.
    r = exchange(proxy, (client[0], "wrong"), code, verifier)
    assert r.status_code == 401 and r.json()["error"] == "invalid_client"
    # An injected upstream fault is passed back as is.
    auth_server.inject_fault("token", status=503, body='{"error": "temporarily_unavailable"}')
    r = exchange(proxy, client, code, verifier)
    assert r.status_code == 503 and r.json() == {"error": "temporarily_unavailable"}
    assert proxy.token_requests == 4
    assert len(proxy.id_tokens) == 1


def test_refresh_through_proxy_rotates_seen_by_user_tokens(auth_server, browser, tamper_proxy):
    proxy = tamper_proxy
    client = auth_server.register_client(redirect_uris=[REDIRECT_URI])
    client_id = client[0]
    carol = "carol-" + secrets.token_hex(4)  # a user of this test's own: the unfiltered listing is exact
    auth_server.create_user(carol, "carol-password", name="Carol Tokens")
    code, verifier = sign_in(proxy, browser, client_id, "n2", user=carol)
    first = exchange(proxy, client, code, verifier).json()

    listed = auth_server.user_tokens(carol, client_id=client_id)
    assert [t["token"] for t in listed["access_tokens"]] == [first["access_token"]]
    assert [t["token"] for t in listed["refresh_tokens"]] == [first["refresh_token"]]
    assert listed["access_tokens"][0]["active"] is True and listed["access_tokens"][0]["expires"]
    assert listed["refresh_tokens"][0]["revoked"] is None and listed["refresh_tokens"][0]["active"] is True

    r = requests.post(
        proxy.token_endpoint,
        data={"grant_type": "refresh_token", "refresh_token": first["refresh_token"]},
        auth=client,
        timeout=10,
    )
    assert r.status_code == 200, r.text
    second = r.json()
    assert second["refresh_token"] != first["refresh_token"]
    assert "id_token" in second  # DOT re-issues it on refresh: forged as well
    assert decode_jwt_unverified(second["id_token"])[1]["iss"] == proxy.issuer

    listed = auth_server.user_tokens(carol)
    refresh = {t["token"]: t for t in listed["refresh_tokens"]}
    assert refresh[first["refresh_token"]]["active"] is False and refresh[first["refresh_token"]]["revoked"]
    assert refresh[second["refresh_token"]]["active"] is True and refresh[second["refresh_token"]]["revoked"] is None
    assert [t["token"] for t in listed["refresh_tokens"]][-1] == second["refresh_token"]  # oldest first
    active_access = [t["token"] for t in listed["access_tokens"] if t["active"]]
    assert active_access == [second["access_token"]]

    assert auth_server.user_tokens(carol, client_id="no-such-client") == {"access_tokens": [], "refresh_tokens": []}
    auth_server.revoke_user(carol)
    assert not any(t["active"] for t in auth_server.user_tokens(carol)["refresh_tokens"])
    with pytest.raises(AuthServerError):
        auth_server.user_tokens("nobody-" + secrets.token_hex(4))


# --------------------------------------------------------------------------------- defect modes


DEFECT_MODES = [m for m in TamperProxy.MODES if m != "valid"]


def test_modes_list_is_complete():
    assert set(TamperProxy.MODES) == {
        "valid",
        "bad_signature",
        "wrong_aud",
        "wrong_nonce",
        "expired",
        "future_iat",
        "wrong_issuer",
        "alg_none",
        "hs256_with_public_key",
        "unknown_kid",
        "missing_nonce",
    }


@pytest.mark.parametrize("mode", DEFECT_MODES)
def test_defect_mode(auth_server, browser, client, tamper_proxy, mode):
    proxy = tamper_proxy
    proxy.mode = mode
    client_id, _ = client
    nonce = secrets.token_urlsafe(12)
    tokens = tokens_through_proxy(proxy, browser, client, nonce)
    token = tokens["id_token"]
    upstream, sent = proxy.id_tokens[-1]
    assert sent == token != upstream
    header, claims = decode_jwt_unverified(token)
    _, real = decode_jwt_unverified(upstream)
    keyset = proxy_keyset(proxy)
    now = time.time()

    # The rest of the answer is the real server's, untouched.
    assert auth_server.token_active(tokens["access_token"]) and auth_server.token_active(tokens["refresh_token"])
    # Only the claims the mode is about differ from a `valid` forgery of the same token.
    touched = {
        "bad_signature": set(),
        "wrong_aud": {"aud"},
        "wrong_nonce": {"nonce"},
        "missing_nonce": {"nonce"},
        "expired": {"exp", "iat", "auth_time"},
        "future_iat": {"iat", "exp"},
        "wrong_issuer": {"iss"},
        "alg_none": set(),
        "hs256_with_public_key": set(),
        "unknown_kid": set(),
    }[mode]
    expected = {**real, "iss": proxy.issuer}
    assert {k: v for k, v in claims.items() if k not in touched} == {
        k: v for k, v in expected.items() if k not in touched
    }
    assert real["aud"] == client_id and real["nonce"] == nonce

    if mode == "bad_signature":
        assert header == {"alg": "RS256", "typ": "JWT", "kid": "proxy-1"} and claims == expected
        assert not signature_ok(token, keyset)
        with pytest.raises(Exception):
            jwt.JWT(jwt=token, key=keyset, algs=["RS256"])
        # exactly one byte of the signature differs from the valid one
        valid = proxy.forge_id_token(upstream, "valid")
        assert valid.rsplit(".", 1)[0] == token.rsplit(".", 1)[0]
        assert signature_ok(valid, keyset)
        from support.tamper_proxy import b64url_decode

        a, b = b64url_decode(valid.rsplit(".", 1)[1]), b64url_decode(token.rsplit(".", 1)[1])
        assert len(a) == len(b) and sum(x != y for x, y in zip(a, b)) == 1
        return
    if mode == "alg_none":
        assert header["alg"] == "none" and "kid" not in header
        assert token.endswith(".") and token.count(".") == 2
        assert claims == expected
        assert not signature_ok(token, keyset)
        return
    if mode == "hs256_with_public_key":
        assert header["alg"] == "HS256" and header["kid"] == "proxy-1"
        assert claims == expected
        assert not signature_ok(token, keyset)  # not an RS256 signature by the published key
        # ... but a valid HMAC keyed with the published public key's PEM: the confusion attack.
        pem = jwk.JWK.from_json(json.dumps(keyset.get_key("proxy-1").export_public(as_dict=True))).export_to_pem()
        assert pem == proxy.public_key_pem
        assert signature_ok(token, jwk.JWK(kty="oct", k=jws.base64url_encode(pem)), alg="HS256")
        return
    if mode == "unknown_kid":
        assert header["alg"] == "RS256" and header["kid"] == proxy.unknown_kid != "proxy-1"
        assert keyset.get_key(header["kid"]) is None
        assert claims == expected
        assert not signature_ok(token, keyset)
        assert signature_ok(token, jwk.JWK.from_pyca(proxy.unknown_key.public_key()))  # a real signature
        return

    # Every other mode: a correctly signed token by the published key, with a defective claim.
    assert header == {"alg": "RS256", "typ": "JWT", "kid": "proxy-1"}
    assert signature_ok(token, keyset)
    if mode == "wrong_aud":
        assert claims["aud"] != client_id and client_id not in claims["aud"]
    elif mode == "wrong_nonce":
        assert claims["nonce"] and claims["nonce"] != nonce
    elif mode == "missing_nonce":
        assert "nonce" not in claims
    elif mode == "expired":
        assert now - 3700 < claims["exp"] < now - 3500 and now - 7300 < claims["iat"] < now - 7100
        with pytest.raises(jwt.JWTExpired):
            jwt.JWT(jwt=token, key=keyset, algs=["RS256"])
    elif mode == "future_iat":
        assert now + 3500 < claims["iat"] < now + 3700 and claims["exp"] > claims["iat"]
    elif mode == "wrong_issuer":
        assert claims["iss"] == auth_server.issuer != proxy.issuer
    else:  # pragma: no cover
        pytest.fail(f"mode {mode} not checked")
