"""private_key_jwt (RFC 7523, OpenID Connect Core §9) and Pushed Authorization Requests (RFC 9126)
towards a real OpenID Provider: idpyoidc's (support/idpy_op.py), which fetches the broker's
public keys from GET /providers/op/client-jwks (the registered jwks_uri) and checks every
assertion's signature, `aud` and one-time `jti`. The broker holds no client secret.

On the embedded store, and on PostgreSQL with two instances taking turns (no stickiness): the
login begins (and is pushed) on one, comes back and is exchanged on the other.
"""

import base64
import json
import subprocess
from urllib.parse import urlsplit

import pytest
import requests

from conftest import add_idpy_users
from support.broker import STATE_KEY, App, BrokerProcess, broker_binary, broker_config, free_port, wait_for
from support.browser import Browser, BrowserError, query_params
from support.client_keys import public_jwks, thumbprint, write_key
from support.idpy_op import IdpyOP

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


@pytest.fixture(scope="module")
def issuer_op():
    """An OP that takes only its issuer as a client assertion's audience (RFC 7523bis, FAPI 2.0)."""
    with IdpyOP(assertion_audience="issuer") as op:
        add_idpy_users(op)
        yield op


def op_provider(op, client_id, key_file, *, extra="") -> str:
    return f"""
  op:
    issuer: {op.issuer}
    client_id: {client_id}
    token_endpoint_auth_method: private_key_jwt
    private_key_file: {key_file}
    scopes: [openid, profile, email, offline_access]
    # idpyoidc issues a refresh token for offline_access, which OIDC Core §11 pairs with prompt=consent.
    authorization_params:
      prompt: consent
{extra}"""


class Deployment:
    """Brokers (one, or `instances` on one PostgreSQL database behind one public URL) registered
    at `op` as one private_key_jwt client; stopped by `stop()`."""

    def __init__(self, op, tmp_path, *, key_kind="RSA", extra="", env=None, instances=1, register=None, key_file=None):
        self.op = op
        self.ports = [free_port() for _ in range(instances)]
        self.public_url = f"http://127.0.0.1:{self.ports[-1]}"
        self.key_file = key_file or write_key(tmp_path / f"broker-{key_kind.lower()}.pem", key_kind)
        registration = {"jwks_uri": f"{self.public_url}/providers/op/client-jwks"}
        registration.update(register or {})
        self.client_id, _ = op.register_client([f"{self.public_url}/callback"], **registration)
        self.config = broker_config(op_provider(op, self.client_id, self.key_file, extra=extra))
        self.env = {"BROKER_PUBLIC_URL": self.public_url, **(env or {})}
        self.brokers = []
        try:
            for port in self.ports:
                self.brokers.append(BrokerProcess(self.config, env=self.env, port=port))
        except Exception:
            self.stop()
            raise

    def app(self, index=0, browser=None) -> App:
        browser = browser or Browser(allowed_hosts=[self.op.host])
        for broker in self.brokers:
            browser.allow(broker.host)
        return App(self.brokers[index], browser, provider="op")

    def stop(self):
        for broker in self.brokers:
            broker.stop()


def assertions_of(op, client_id):
    return [a for a in op.seen()["assertions"] if a["client_id"] == client_id]


def decode_segment(token: str, index: int) -> dict:
    segment = token.split(".")[index]
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))


@pytest.mark.parametrize("key_kind, audience", [("RSA", "endpoint"), ("EC", "issuer")])
def test_sign_in_refresh_and_revoke_without_a_client_secret(idpy_op, issuer_op, tmp_path, store_env, key_kind, audience):
    op = idpy_op if audience == "endpoint" else issuer_op
    extra = "    client_assertion_audience: endpoint\n" if audience == "endpoint" else ""
    instances = 2 if store_env else 1
    deployment = Deployment(op, tmp_path, key_kind=key_kind, extra=extra, env=store_env, instances=instances)
    try:
        op.reset_seen()
        keys = requests.get(deployment.public_url + "/providers/op/client-jwks", timeout=10)
        assert keys.status_code == 200 and keys.headers["Content-Type"].startswith("application/json")
        kid = thumbprint(deployment.key_file)
        assert [k["kid"] for k in keys.json()["keys"]] == [kid]
        assert "d" not in keys.json()["keys"][0]

        # The login begins on the first instance and comes back to the last (the public URL).
        first, last = deployment.app(0), deployment.app(instances - 1)
        tokens = first.login("alice")
        last.session_token = tokens["session_token"]
        userinfo = requests.get(op.userinfo_endpoint, headers={"Authorization": f"Bearer {tokens['access_token']}"}, timeout=10)
        assert userinfo.status_code == 200 and userinfo.json()["name"] == "Alice Liddell"
        assert last.call("GET", "/session").json()["subject"] == userinfo.json()["sub"]

        refreshed = last.call("POST", "/refresh")
        assert refreshed.status_code == 200, refreshed.text
        access_token = refreshed.json()["access_token"]
        assert access_token != tokens["access_token"]

        revoked = first.call("POST", "/revoke")
        assert revoked.json() == {"revoked": True, "provider_revocation": "succeeded"}
        after = requests.get(op.userinfo_endpoint, headers={"Authorization": f"Bearer {access_token}"}, timeout=10)
        assert after.status_code == 401, after.text

        seen = assertions_of(op, deployment.client_id)
        # PAR (the OP advertises it, par: auto), the code exchange, the refresh, two revocations.
        assert [a["endpoint"] for a in seen] == ["pushed_authorization", "token", "token", "token_revocation", "token_revocation"]
        for assertion in seen:
            claims, header = assertion["claims"], assertion["header"]
            assert assertion["method"] == "private_key_jwt"
            assert header == {"alg": "RS256" if key_kind == "RSA" else "ES256", "kid": kid, "typ": "JWT"}
            assert claims["iss"] == claims["sub"] == deployment.client_id
            assert claims["exp"] - claims["iat"] == 60
            called = {"pushed_authorization": op.pushed_authorization_request_endpoint, "token": op.token_endpoint,
                      "token_revocation": op.revocation_endpoint}[assertion["endpoint"]]
            assert claims["aud"] == [called if audience == "endpoint" else op.issuer]
        assert len({a["claims"]["jti"] for a in seen}) == len(seen)
        for broker in deployment.brokers:
            assert deployment.key_file.read_text().splitlines()[1] not in broker.log_text
    finally:
        deployment.stop()


def test_the_provider_refuses_a_key_it_was_not_given(idpy_op, tmp_path):
    """Negative control: the OP really checks the signature. The client is registered with one
    key (inline), the broker signs with another: the code exchange is refused."""
    registered = write_key(tmp_path / "registered.pem")
    deployment = Deployment(idpy_op, tmp_path, register={"jwks_uri": None, "jwks": public_jwks(registered)},
                            extra="    client_assertion_audience: endpoint\n    par: off\n")
    try:
        params, _ = deployment.app().sign_in("alice")
        assert params["error"] == "server_error" and params["error_description"] == "The provider did not accept the sign-in."
        # The broker's output is read by a thread of the test: the line may come just after the redirect.
        broker = deployment.brokers[0]
        assert wait_for(lambda: any('"msg":"login failed"' in line and "invalid_client" in line for line in broker.lines), 30)
    finally:
        deployment.stop()
    # The same OP and registration, with the registered key: signed in.
    deployment = Deployment(idpy_op, tmp_path, register={"jwks_uri": None, "jwks": public_jwks(registered)}, key_file=registered,
                            extra="    client_assertion_audience: endpoint\n    par: off\n")
    try:
        assert deployment.app().login("alice")["provider"] == "op"
    finally:
        deployment.stop()


def test_a_key_rotation_keeps_signing_in(idpy_op, tmp_path):
    """The next key is published beside the current one; after the switch the previous one is.
    The OP took both from the broker's key set before the switch, so nothing breaks."""
    current = write_key(tmp_path / "current.pem")
    upcoming = write_key(tmp_path / "next.pem", "EC")
    rotation = "    client_assertion_audience: endpoint\n    second_key_file: {}\n"
    before = Deployment(idpy_op, tmp_path, key_file=current, extra=rotation.format(upcoming))
    try:
        published = requests.get(before.public_url + "/providers/op/client-jwks", timeout=10).json()["keys"]
        assert [k["kid"] for k in published] == [thumbprint(current), thumbprint(upcoming)]
        assert [k["alg"] for k in published] == ["RS256", "ES256"]
        idpy_op.reset_seen()
        before.app().login("alice")
        assert {a["header"]["kid"] for a in assertions_of(idpy_op, before.client_id)} == {thumbprint(current)}
    finally:
        before.stop()
    # The switch: same client, same public URL, the keys swapped.
    port = int(urlsplit(before.public_url).port)
    config = before.config.replace(f"private_key_file: {current}", f"private_key_file: {upcoming}").replace(
        f"second_key_file: {upcoming}", f"second_key_file: {current}")
    after = BrokerProcess(config, env=before.env, port=port)
    try:
        published = requests.get(before.public_url + "/providers/op/client-jwks", timeout=10).json()["keys"]
        assert [k["kid"] for k in published] == [thumbprint(upcoming), thumbprint(current)]
        idpy_op.reset_seen()
        browser = Browser(allowed_hosts=[idpy_op.host, after.host])
        App(after, browser, provider="op").login("alice")
        assert {a["header"]["kid"] for a in assertions_of(idpy_op, before.client_id)} == {thumbprint(upcoming)}
        assert {a["header"]["alg"] for a in assertions_of(idpy_op, before.client_id)} == {"ES256"}
    finally:
        after.stop()


def authorize_location(app: App) -> str:
    url, _ = app.authorize_url()
    return app.browser.get_location(url)


@pytest.mark.parametrize("par, op_requires, registered_for_par", [
    ("auto", False, False), ("required", False, True), ("auto", True, False),
])
def test_pushed_authorization_requests(idpy_op, tmp_path, par, op_requires, registered_for_par):
    op = IdpyOP(require_par=True, assertion_audience="both").start() if op_requires else idpy_op
    try:
        if op_requires:
            add_idpy_users(op)
        deployment = Deployment(op, tmp_path, extra=f"    par: {par}\n    client_assertion_audience: endpoint\n",
                                register={"require_pushed_authorization_requests": registered_for_par})
        try:
            app = deployment.app()
            op.reset_seen()
            location = authorize_location(app)
            assert location.startswith(op.authorization_endpoint + "?")
            # RFC 9126 §4: the browser carries the client and the pushed request, nothing else.
            params = query_params(location)
            assert set(params) == {"client_id", "request_uri"} and params["client_id"] == deployment.client_id
            seen = op.seen()
            assert [p["request_uri"] for p in seen["pushed"]] == [params["request_uri"]]
            tokens = app.login("alice")
            assert tokens["provider"] == "op"
            assert all(a["params"] == ["client_id", "request_uri"] and not a["refused"] for a in op.seen()["authorization"])
        finally:
            deployment.stop()
    finally:
        if op_requires:
            op.stop()


def test_par_off_sends_the_request_by_the_browser_and_a_client_held_to_par_is_refused_then(idpy_op, tmp_path):
    plain = Deployment(idpy_op, tmp_path, extra="    par: off\n    client_assertion_audience: endpoint\n")
    held = Deployment(idpy_op, tmp_path, extra="    par: off\n    client_assertion_audience: endpoint\n",
                      register={"require_pushed_authorization_requests": True})
    try:
        idpy_op.reset_seen()
        params = query_params(authorize_location(plain.app()))
        assert "request_uri" not in params and params["code_challenge_method"] == "S256" and params["client_id"] == plain.client_id
        assert plain.app().login("alice")["provider"] == "op"
        assert idpy_op.seen()["pushed"] == []
        # The OP enforces what the client was registered with: without PAR its sign-in is refused there.
        with pytest.raises(BrowserError) as refused:
            held.app().sign_in("alice")
        assert refused.value.response.status_code == 400 and "pushed authorization request required" in refused.value.response.text
    finally:
        plain.stop()
        held.stop()


def run_check_config(config_path, *extra):
    """check-config as serve would see it: with the state key serve needs."""
    return subprocess.run([broker_binary(), "check-config", str(config_path), *extra], capture_output=True, text=True, timeout=60,
                           env={"PATH": "/usr/bin:/bin", "BROKER_STATE_KEY": STATE_KEY})


def test_a_provider_that_cannot_serve_the_configuration_is_reported_and_starts_no_login(auth_server, idpy_op, tmp_path):
    """django-oauth-toolkit lists neither private_key_jwt nor a PAR endpoint; idpyoidc under
    require_par refuses requests that are not pushed. check-config --discovery reports all three;
    without --discovery it stays offline and passes. serve refuses to start for the first two
    (private_key_jwt and par: required rest on the document); the third (par: off) is found when
    the document is read: /readyz warns (a provider is
    every instance's, so the instance stays ready) and /authorize starts no login."""
    key = write_key(tmp_path / "key.pem")
    (tmp_path / "secret.txt").write_text("s")
    dot = f"""
  dot:
    issuer: {auth_server.issuer}
    client_id: x
    token_endpoint_auth_method: private_key_jwt
    private_key_file: {key}
    par: required
"""
    strict = IdpyOP(require_par=True).start()
    try:
        port = free_port()
        fine_client, _ = idpy_op.register_client([f"http://127.0.0.1:{port}/callback"],
                                                 jwks_uri=f"http://127.0.0.1:{port}/providers/fine/client-jwks")
        others = f"""
  strict:
    issuer: {strict.issuer}
    client_id: y
    client_secret_file: {tmp_path / "secret.txt"}
    par: off
  fine:
    issuer: {idpy_op.issuer}
    client_id: {fine_client}
    token_endpoint_auth_method: private_key_jwt
    private_key_file: {key}
    client_assertion_audience: endpoint
"""
        config_path = tmp_path / "broker.yaml"
        config_path.write_text(broker_config(dot + others))
        offline = run_check_config(config_path)
        assert offline.returncode == 0, offline.stderr
        assert f"providers.dot: private_key_jwt with kid {thumbprint(key)}; register the client's jwks_uri as " in offline.stdout
        online = run_check_config(config_path, "--discovery")
        assert online.returncode == 1
        lines = online.stderr.splitlines()
        expected_dot = [
            "providers.dot: token_endpoint_auth_method is private_key_jwt, but the provider's discovery document does not list it in "
            "token_endpoint_auth_methods_supported (it lists client_secret_post, client_secret_basic)",
            "providers.dot: par is required, but the provider's discovery document has no pushed_authorization_request_endpoint",
        ]
        for expected in expected_dot:
            assert any(expected in line for line in lines), online.stderr
        assert any("providers.strict: par is off, but the provider requires pushed authorization requests" in line for line in lines)
        assert not any("providers.fine" in line for line in lines)

        refused = subprocess.run([broker_binary(), "serve", "--config", str(config_path), "--listen", "127.0.0.1:0"],
                                 capture_output=True, text=True, timeout=60,
                                 env={"PATH": "/usr/bin:/bin", "BROKER_STATE_KEY": STATE_KEY, "BROKER_STATE_DIR": str(tmp_path / "state")})
        assert refused.returncode == 1
        assert "cannot start: the providers' discovery documents lack what their configuration relies on" in refused.stderr
        assert all(expected in refused.stderr for expected in expected_dot) and "providers.strict" not in refused.stderr

        broker = BrokerProcess(broker_config(others), port=port)
        try:
            # /readyz answers from memory: the documents fetched in the background since the start.
            def fetched():
                ready = requests.get(broker.url("/readyz"), timeout=30)
                assert ready.status_code == 200
                checks = ready.json()["checks"]
                return checks if all("being fetched" not in check.get("detail", "") for check in checks.values()) else None
            assert wait_for(fetched, 30)
            checks = fetched()
            assert checks["provider:fine"]["status"] == "pass" and checks["provider:strict"]["status"] == "warn"
            assert "par is off, but the provider requires pushed authorization requests" in checks["provider:strict"]["detail"]
            browser = Browser(allowed_hosts=[broker.host])
            refused = requests.get(App(broker, browser, provider="strict").authorize_url()[0], timeout=10,
                                   headers={"Accept": "application/json"}, allow_redirects=False)
            assert refused.status_code == 502 and refused.json()["error"] == "upstream_error"
            # The log line is read from the broker's output as it comes: wait for it.
            assert wait_for(lambda: any('"msg":"the provider cannot start a login"' in line and "par is off" in line
                                        for line in broker.lines), timeout=10)
            # Negative control: the provider that offers what it needs signs in on the same broker.
            fine = requests.get(App(broker, browser, provider="fine").authorize_url()[0], timeout=10,
                                headers={"Accept": "application/json"}, allow_redirects=False)
            assert fine.status_code == 200 and "request_uri=" in fine.json()["authorization_url"]
        finally:
            broker.stop()
    finally:
        strict.stop()
