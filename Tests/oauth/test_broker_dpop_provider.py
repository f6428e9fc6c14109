"""DPoP towards a provider (RFC 9449): the broker binds the provider's tokens to a key of its own,
per grant, against a real OpenID Provider — idpyoidc's (support/idpy_op.py) with DPoP, nonces and
a DPoP-protected API, and PAR and private_key_jwt as the AT Protocol's profile asks for all three
together. The OP checks every proof (signature, htm, htu, iat, jti once, ath, its nonce, the key a
token is bound to) and records what it saw; the tests read that record.

On the embedded store, and on PostgreSQL with two instances taking turns (no stickiness; conftest's
`store_env`): the
key made where the login began proves the code exchange on the other instance, and a session's
refresh, proxy calls and revocation on either.
"""

import pytest

from conftest import add_idpy_users
from support.broker import wait_for
from support.idpy_op import IdpyOP
from test_broker_private_key_jwt import Deployment


@pytest.fixture(scope="module")
def dpop_op():
    """The AT Protocol's shape: PAR required, private_key_jwt, DPoP with server nonces."""
    with IdpyOP(dpop=True, dpop_nonce=True, require_par=True, assertion_audience="issuer") as op:
        add_idpy_users(op)
        yield op


def api_settings(op, dpop="auto") -> str:
    return f"    api_base_url: {op.api_url}\n    api_allow_private_addresses: true\n    dpop: {dpop}\n"


def dpop_seen(op, endpoint=None):
    return [entry for entry in op.seen()["dpop"] if endpoint is None or entry["endpoint"] == endpoint]


def logged_text(deployment) -> str:
    return "\n".join(broker.log_text for broker in deployment.brokers)


def test_a_dpop_provider_binds_every_grant_to_the_brokers_key(dpop_op, tmp_path, store_env):
    op = dpop_op
    instances = 2 if store_env else 1
    deployment = Deployment(op, tmp_path, key_kind="EC", extra=api_settings(op), env=store_env, instances=instances)
    try:
        op.reset_seen()
        first, last = deployment.app(0), deployment.app(instances - 1)
        tokens = first.login("alice")
        last.session_token = tokens["session_token"]

        # PAR and the code exchange each carried a proof of one key; the OP's nonce was learnt
        # from its first refusal, once.
        pushed, exchanged = dpop_seen(op, "par"), dpop_seen(op, "token")
        assert [(e["accepted"], e["error"]) for e in pushed] == [(False, "use_dpop_nonce"), (True, None)], pushed
        assert [e["grant_type"] for e in exchanged if e["accepted"]] == ["authorization_code"], exchanged
        assert all(e["nonce"] for e in exchanged if e["accepted"]), "the nonce learnt at PAR goes with the exchange"
        jkt = pushed[-1]["jkt"]
        assert jkt and all(e["jkt"] == jkt for e in pushed + exchanged)
        assert pushed[-1]["htu"] == f"{op.issuer}/par" and pushed[-1]["htm"] == "POST"

        # The app gets its session, never the bound provider token.
        assert "access_token" not in tokens and tokens["token_type"] == "DPoP", tokens
        refused = last.call("GET", "/token")
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"] == "provider_token_bound" and "/proxy/op/" in refused.json()["error_description"]
        assert last.call("GET", "/session").json()["provider_token_type"] == "DPoP"

        # The proxy calls the DPoP API with a proof of the same key and the token's hash.
        for app in (first, last):
            called = app.call("GET", "/proxy/op/me?x=1")
            assert called.status_code == 200, called.text
            assert called.json()["jkt"] == jkt and called.json()["query"] == "x=1"
        calls = dpop_seen(op, "api")
        assert calls[-1]["accepted"] and calls[-1]["ath"] and calls[-1]["htu"] == f"{op.api_url}/me"

        # A nonce the OP changes is learnt from its challenge, and the call made once more.
        op.reset_seen()
        op.rotate_dpop_nonce()
        again = last.call("POST", "/proxy/op/echo", data=b"hello", headers={"Content-Type": "text/plain"})
        assert again.status_code == 200 and again.json()["body_length"] == 5, again.text
        assert [(e["accepted"], e["error"]) for e in dpop_seen(op, "api")] == [(False, "use_dpop_nonce"), (True, None)]

        # The profile comes from userinfo with the DPoP scheme.
        profile = first.call("GET", "/profile")
        assert profile.status_code == 200 and profile.json()["name"] == "Alice Liddell", profile.text
        assert dpop_seen(op, "userinfo")[-1]["accepted"]

        # A refresh proves the grant's key (the OP refuses any other for a bound grant), and so
        # does the revocation.
        refreshed = first.call("POST", "/refresh")
        assert refreshed.status_code == 200 and refreshed.json()["token_type"] == "DPoP", refreshed.text
        refreshes = [e for e in dpop_seen(op, "token") if e["grant_type"] == "refresh_token" and e["accepted"]]
        assert len(refreshes) == 1 and refreshes[0]["jkt"] == jkt
        assert last.call("GET", "/proxy/op/me").status_code == 200
        revoked = last.call("POST", "/revoke")
        assert revoked.json() == {"revoked": True, "provider_revocation": "succeeded"}, revoked.text
        # (An instance that has not called the OP's token endpoint yet learns its nonce first.)
        revocations = dpop_seen(op, "revoke")
        assert revocations and all(e["jkt"] == jkt and (e["accepted"] or e["error"] == "use_dpop_nonce") for e in revocations)
        assert sum(e["accepted"] for e in revocations) == 2, "the refresh token and the access token"
        assert all(e["error"] is None for e in revocations if e["accepted"])

        # Nothing of the grant in the logs: no token, no proof.
        logs = logged_text(deployment)
        assert tokens["session_token"] not in logs and "eyJ" not in logs
    finally:
        deployment.stop()


def test_each_grant_has_a_key_of_its_own(dpop_op, tmp_path):
    deployment = Deployment(dpop_op, tmp_path, key_kind="EC", extra=api_settings(dpop_op))
    try:
        alice, bob = deployment.app(0), deployment.app(0)
        alice.login("alice")
        bob.login("bob")
        keys = {app.call("GET", "/proxy/op/me").json()["jkt"] for app in (alice, bob)}
        assert len(keys) == 2
    finally:
        deployment.stop()


def test_off_keeps_bearer_tokens_at_a_dpop_provider(dpop_op, tmp_path):
    deployment = Deployment(dpop_op, tmp_path, key_kind="EC", extra=api_settings(dpop_op, "off"))
    try:
        dpop_op.reset_seen()
        app = deployment.app(0)
        tokens = app.login("alice")
        assert tokens["token_type"] == "Bearer" and tokens["access_token"]
        assert app.call("GET", "/token").status_code == 200
        assert [e for e in dpop_seen(dpop_op) if e["endpoint"] != "api"] == []
        # Its API takes only bound tokens: the broker's bearer call is refused there, as it should be.
        assert app.call("GET", "/proxy/op/me").status_code == 401
    finally:
        deployment.stop()


def test_required_refuses_a_provider_that_answers_bearer_tokens(idpy_op, tmp_path):
    """idpyoidc without DPoP ignores the proofs and issues bearer tokens: under `dpop: required`
    the sign-in fails with a clear error, and the tokens it brought are revoked."""
    deployment = Deployment(idpy_op, tmp_path, key_kind="EC", extra="    client_assertion_audience: endpoint\n    dpop: required\n")
    try:
        app = deployment.app(0)
        params, _ = app.sign_in("alice")
        assert params.get("error") == "server_error", params
        assert "did not bind its token" in params.get("error_description", "")
        revoked = lambda: any(a["endpoint"] == "token_revocation" and a["client_id"] == deployment.client_id
                              for a in idpy_op.seen()["assertions"])
        assert wait_for(revoked, timeout=30), "the bearer tokens brought are revoked"
    finally:
        deployment.stop()

