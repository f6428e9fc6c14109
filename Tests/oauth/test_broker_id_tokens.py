"""ID tokens are verified: a forging stand-in issuer in front of the real server tampers with them."""
import pytest

from support.broker import wait_for


def test_a_valid_id_token_through_the_stand_in_issuer_is_accepted(broker_factory, tamper_proxy, auth_server):
    tamper_proxy.mode = "valid"
    broker, app, _, _ = broker_factory(issuer=tamper_proxy.issuer)
    tokens = app.login("alice")
    assert app.call("GET", "/session").json()["subject"] == auth_server.users["alice"].sub
    assert tokens["provider"] == "dot"


@pytest.mark.parametrize("mode", [
    "bad_signature", "wrong_aud", "wrong_nonce", "missing_nonce", "expired", "future_iat",
    "wrong_issuer", "alg_none", "hs256_with_public_key", "unknown_kid",
])
def test_tampered_id_tokens_are_rejected(broker_factory, tamper_proxy, mode):
    tamper_proxy.mode = mode
    broker, app, _, _ = broker_factory(issuer=tamper_proxy.issuer)
    params, _ = app.sign_in("alice", state="s-" + mode)
    assert "code" not in params, mode
    assert params["error"] == "server_error" and params["state"] == "s-" + mode
    assert params["error_description"] == "The provider's ID token is invalid."
    # The log line is written before the redirect; the reader thread may still be catching up.
    assert wait_for(lambda: any('"msg":"login failed"' in line for line in broker.lines))


def test_unknown_kids_do_not_hammer_the_jwks_endpoint(broker_factory, tamper_proxy):
    tamper_proxy.mode = "unknown_kid"
    broker, app, _, _ = broker_factory(issuer=tamper_proxy.issuer)
    tamper_proxy.reset_counts()
    for attempt in range(4):
        params, _ = app.sign_in("alice", state=f"k{attempt}")
        assert params["error"] == "server_error"
    # One fetch on first use; a refetch on the unknown kid is allowed at most once a minute.
    assert 1 <= tamper_proxy.jwks_requests <= 2
