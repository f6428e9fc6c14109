"""Self-check of the idpyoidc OpenID Provider launcher (support/idpy_op.py), with no broker: a
client played by hand, with its own key pair and a loopback server for its JWKS and its
back-channel logout endpoint, does what the broker will do against it."""

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode

import pytest
import requests
from jwcrypto import jwk, jwt

from conftest import add_idpy_users
from support.browser import Browser, BrowserError, query_params
from support.idpy_op import IdpyOP
from support.pkce import make_pkce

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


class ClientSide:
    """What a relying party shows an OP: its JWKS (GET /jwks.json) and its back-channel logout
    endpoint (POST /backchannel, whose logout tokens are kept), on a free loopback port."""

    def __init__(self):
        self.key = jwk.JWK.generate(kty="RSA", size=2048, kid=f"k-{uuid.uuid4().hex[:8]}", alg="RS256", use="sig")
        self.logout_tokens: list[str] = []
        self.jwks_fetches = 0
        side = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                side.jwks_fetches += 1
                body = json.dumps({"keys": [json.loads(side.key.export_public())]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
                side.logout_tokens.extend(form.get("logout_token", []))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def redirect_uri(self) -> str:
        return f"{self.base}/callback"

    def assertion(self, client_id: str, aud: str, jti: str = None) -> str:
        now = int(time.time())
        token = jwt.JWT(
            header={"alg": "RS256", "kid": self.key.kid},
            claims={"iss": client_id, "sub": client_id, "aud": aud, "jti": jti or uuid.uuid4().hex,
                    "iat": now, "exp": now + 60},
        )
        token.make_signed_token(self.key)
        return token.serialize()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def rp():
    side = ClientSide()
    yield side
    side.close()


def authenticated(rp, client_id, aud, **form):
    return {**form, "client_id": client_id, "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": rp.assertion(client_id, aud)}


def sign_in_with_par(op, rp, client_id, browser):
    """PAR, then the front-channel request with client_id and request_uri only; returns (tokens, verifier)."""
    verifier, challenge = make_pkce()
    pushed = requests.post(op.pushed_authorization_request_endpoint, data=authenticated(
        rp, client_id, op.pushed_authorization_request_endpoint,
        response_type="code", redirect_uri=rp.redirect_uri, scope="openid profile email offline_access",
        prompt="consent", state="st-1", nonce="n-1", code_challenge=challenge, code_challenge_method="S256",
    ), timeout=10)
    assert pushed.status_code == 201, pushed.text
    request_uri = pushed.json()["request_uri"]
    location = browser.authorize(
        f"{op.authorization_endpoint}?{urlencode({'client_id': client_id, 'request_uri': request_uri})}",
        "alice", "alice-password")
    params = query_params(location)
    assert params["state"] == "st-1" and params["iss"] == op.issuer, params
    tokens = requests.post(op.token_endpoint, data=authenticated(
        rp, client_id, op.token_endpoint, grant_type="authorization_code", code=params["code"],
        redirect_uri=rp.redirect_uri, code_verifier=verifier,
    ), timeout=10)
    assert tokens.status_code == 200, tokens.text
    return tokens.json()


def test_discovery_lists_what_the_broker_checks(idpy_op):
    d = idpy_op.discovery()
    assert d["issuer"] == idpy_op.issuer
    assert "private_key_jwt" in d["token_endpoint_auth_methods_supported"]
    assert d["pushed_authorization_request_endpoint"] == idpy_op.pushed_authorization_request_endpoint
    assert d["authorization_response_iss_parameter_supported"] is True
    assert d["require_pushed_authorization_requests"] is False
    assert d["backchannel_logout_supported"] is True and d["backchannel_logout_session_supported"] is True
    assert d["revocation_endpoint"] == idpy_op.revocation_endpoint


def test_private_key_jwt_with_par_refresh_and_revocation(idpy_op, rp):
    client_id, _ = idpy_op.register_client([rp.redirect_uri], jwks_uri=f"{rp.base}/jwks.json")
    idpy_op.reset_seen()
    browser = Browser(allowed_hosts=[idpy_op.host])
    tokens = sign_in_with_par(idpy_op, rp, client_id, browser)
    assert rp.jwks_fetches >= 1  # the OP fetched the client's keys from its jwks_uri
    refreshed = requests.post(idpy_op.token_endpoint, data=authenticated(
        rp, client_id, idpy_op.token_endpoint, grant_type="refresh_token", refresh_token=tokens["refresh_token"],
    ), timeout=10)
    assert refreshed.status_code == 200, refreshed.text
    refresh_token = refreshed.json().get("refresh_token", tokens["refresh_token"])
    revoked = requests.post(idpy_op.revocation_endpoint, data=authenticated(
        rp, client_id, idpy_op.revocation_endpoint, token=refresh_token, token_type_hint="refresh_token",
    ), timeout=10)
    assert revoked.status_code == 200, revoked.text
    again = requests.post(idpy_op.token_endpoint, data=authenticated(
        rp, client_id, idpy_op.token_endpoint, grant_type="refresh_token", refresh_token=refresh_token,
    ), timeout=10)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant", again.text

    seen = idpy_op.seen()
    assert seen["pushed"] == [{"client_id": client_id, "request_uri": seen["pushed"][0]["request_uri"]}]
    assert seen["authorization"][0] == {"params": ["client_id", "request_uri"], "refused": False}
    calls = [(a["endpoint"], a["method"]) for a in seen["assertions"]]
    assert calls == [("pushed_authorization", "private_key_jwt"), ("token", "private_key_jwt"),
                     ("token", "private_key_jwt"), ("token_revocation", "private_key_jwt")]
    assert seen["assertions"][1]["header"]["kid"] == rp.key.kid
    assert seen["assertions"][1]["claims"]["aud"] == [idpy_op.token_endpoint]


def test_client_authentication_is_enforced(idpy_op, rp):
    client_id, secret = idpy_op.register_client([rp.redirect_uri], jwks={"keys": [json.loads(rp.key.export_public())]})
    form = {"grant_type": "refresh_token", "refresh_token": "unknown"}
    # The registered method only: the client's secret is refused.
    by_secret = requests.post(idpy_op.token_endpoint, data=form, auth=(client_id, secret), timeout=10)
    assert by_secret.status_code == 401
    # An assertion for another audience is refused (negative control: the same with the right one passes authentication).
    wrong_aud = requests.post(idpy_op.token_endpoint, data=authenticated(rp, client_id, idpy_op.issuer, **form), timeout=10)
    assert wrong_aud.status_code == 401
    right = requests.post(idpy_op.token_endpoint, data=authenticated(rp, client_id, idpy_op.token_endpoint, **form), timeout=10)
    assert right.status_code == 400 and right.json()["error"] == "invalid_grant", right.text
    # A jti is accepted once.
    replay = {**form, "client_id": client_id, "client_assertion_type": ASSERTION_TYPE,
              "client_assertion": rp.assertion(client_id, idpy_op.token_endpoint, jti="once")}
    assert requests.post(idpy_op.token_endpoint, data=replay, timeout=10).status_code == 400
    assert requests.post(idpy_op.token_endpoint, data=replay, timeout=10).status_code == 401
    # A key the client did not register is refused.
    stranger = ClientSide()
    try:
        forged = requests.post(idpy_op.token_endpoint, data={
            **form, "client_id": client_id, "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": stranger.assertion(client_id, idpy_op.token_endpoint)}, timeout=10)
        assert forged.status_code == 401
    finally:
        stranger.close()


def test_a_client_registered_for_par_is_refused_without_it(idpy_op, rp):
    client_id, _ = idpy_op.register_client([rp.redirect_uri], jwks_uri=f"{rp.base}/jwks.json",
                                           require_pushed_authorization_requests=True)
    _, challenge = make_pkce()
    plain = {"response_type": "code", "client_id": client_id, "redirect_uri": rp.redirect_uri, "scope": "openid",
             "state": "s", "code_challenge": challenge, "code_challenge_method": "S256"}
    browser = Browser(allowed_hosts=[idpy_op.host])
    with pytest.raises(BrowserError) as refused:
        browser.authorize(f"{idpy_op.authorization_endpoint}?{urlencode(plain)}", "alice", "alice-password")
    assert refused.value.response.status_code == 400
    assert "pushed authorization request required" in refused.value.response.text
    # Negative control: the same client through PAR signs in.
    assert "access_token" in sign_in_with_par(idpy_op, rp, client_id, browser)


@pytest.mark.parametrize("audience, accepted, refused", [
    ("issuer", "issuer", "token_endpoint"),
    ("both", "issuer", None),
])
def test_assertion_audience_modes(rp, audience, accepted, refused):
    with IdpyOP(assertion_audience=audience, require_par=True) as op:
        add_idpy_users(op)
        assert op.discovery()["require_pushed_authorization_requests"] is True
        client_id, _ = op.register_client([rp.redirect_uri], jwks_uri=f"{rp.base}/jwks.json")
        form = {"grant_type": "refresh_token", "refresh_token": "unknown"}
        aud = {"issuer": op.issuer, "token_endpoint": op.token_endpoint}
        ok = requests.post(op.token_endpoint, data=authenticated(rp, client_id, aud[accepted], **form), timeout=10)
        assert ok.status_code == 400 and ok.json()["error"] == "invalid_grant", ok.text
        if refused:
            bad = requests.post(op.token_endpoint, data=authenticated(rp, client_id, aud[refused], **form), timeout=10)
            assert bad.status_code == 401
        else:
            both = requests.post(op.token_endpoint, data=authenticated(rp, client_id, op.token_endpoint, **form), timeout=10)
            assert both.status_code == 400


def test_ending_a_users_sessions_sends_a_back_channel_logout_token(idpy_op, rp):
    client_id, _ = idpy_op.register_client([rp.redirect_uri], jwks_uri=f"{rp.base}/jwks.json",
                                           backchannel_logout_uri=f"{rp.base}/backchannel")
    tokens = sign_in_with_par(idpy_op, rp, client_id, Browser(allowed_hosts=[idpy_op.host]))
    op_keys = jwk.JWKSet.from_json(requests.get(idpy_op.jwks_uri, timeout=10).text)
    id_token = json.loads(jwt.JWT(jwt=tokens["id_token"], key=op_keys).claims)

    result = idpy_op.end_sessions("alice")
    assert {"client_id": client_id} in result["ended"]
    assert [d["status"] for d in result["deliveries"] if d["url"] == f"{rp.base}/backchannel"] == [200]
    assert len(rp.logout_tokens) == 1
    logout = jwt.JWT(jwt=rp.logout_tokens[0], key=op_keys)  # signature checked with the OP's JWKS
    claims = json.loads(logout.claims)
    assert claims["iss"] == idpy_op.issuer and client_id in claims["aud"]
    assert "http://schemas.openid.net/event/backchannel-logout" in claims["events"]
    assert claims["sid"] == id_token["sid"] and "nonce" not in claims and claims["jti"]
    # The session is over at the OP: its refresh token no longer works.
    after = requests.post(idpy_op.token_endpoint, data=authenticated(
        rp, client_id, idpy_op.token_endpoint, grant_type="refresh_token", refresh_token=tokens["refresh_token"],
    ), timeout=10)
    assert after.status_code == 400, after.text
