"""Development mode: the built-in provider and demo app, as the README's walk-through uses them."""
import subprocess
from urllib.parse import urlencode

import requests

from support.broker import BrokerProcess, broker_binary, free_port
from support.browser import query_params
from support.dev_login import dev_login, pkce


def test_walk_through_with_the_development_provider():
    broker = BrokerProcess("", args=["--dev"])
    try:
        verifier, challenge = pkce()
        query = urlencode({"provider": "dev", "app": "demo", "redirect_uri": "http://127.0.0.1/callback",
                           "code_challenge": challenge, "code_challenge_method": "S256", "state": "xyz"})
        sign_in = requests.get(broker.url("/authorize?" + query), allow_redirects=False, timeout=10).headers["Location"]
        page = requests.get(sign_in, timeout=10)
        assert page.status_code == 200 and "<form" in page.text
        callback = requests.post(sign_in, data={"user": "alice", "decision": "allow"}, allow_redirects=False, timeout=10)
        back = requests.get(callback.headers["Location"], allow_redirects=False, timeout=10).headers["Location"]
        params = query_params(back)
        assert back.startswith("http://127.0.0.1/callback?") and params["state"] == "xyz"
        tokens = requests.post(broker.url("/token"), data={
            "grant_type": "authorization_code", "code": params["code"], "code_verifier": verifier,
            "redirect_uri": "http://127.0.0.1/callback", "app": "demo"}, timeout=10).json()
        auth = {"Authorization": "Bearer " + tokens["session_token"]}
        assert requests.get(broker.url("/session"), headers=auth, timeout=10).json()["subject"] == "dev-alice"
        assert requests.get(broker.url("/profile"), headers=auth, timeout=10).json()["email"] == "alice@example.test"
        # The README's API proxy example: the built-in provider's userinfo through the broker.
        proxied = requests.get(broker.url("/proxy/dev/userinfo"), headers=auth, timeout=10)
        assert proxied.status_code == 200 and proxied.json()["sub"] == "dev-alice"
        refreshed = requests.post(broker.url("/refresh"), headers=auth, timeout=10).json()
        assert refreshed["access_token"] != tokens["access_token"]
        assert requests.post(broker.url("/revoke"), headers=auth, timeout=10).json()["provider_revocation"] == "succeeded"
        denied = requests.post(sign_in, data={"decision": "deny"}, allow_redirects=False, timeout=10)
        assert denied.status_code == 302
        denied_params = query_params(denied.headers["Location"])
        assert denied_params["error"] == "access_denied" and "code" not in denied_params
    finally:
        assert broker.stop() == 0


def test_development_mode_is_refused_off_loopback():
    result = subprocess.run([broker_binary(), "serve", "--dev", "--listen", f"0.0.0.0:{free_port()}"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert "loopback" in result.stderr


def test_only_the_demo_app_may_use_the_development_provider():
    """An app of the configuration without a `providers` list may use every configured provider,
    but not the built-in one, which signs in anyone who types a name."""
    broker = BrokerProcess("apps:\n  web:\n    redirect_uris: [http://127.0.0.1/cb]\n", args=["--dev"])
    try:
        _, challenge = pkce()

        def authorize(app, redirect_uri):
            query = urlencode({"provider": "dev", "app": app, "redirect_uri": redirect_uri,
                               "code_challenge": challenge, "code_challenge_method": "S256"})
            return requests.get(broker.url("/authorize?" + query), allow_redirects=False, timeout=10)

        refused = authorize("web", "http://127.0.0.1/cb")
        assert refused.status_code == 400 and refused.json()["error"] == "unauthorized_client"
        assert "Location" not in refused.headers
        assert authorize("demo", "http://127.0.0.1/callback").status_code == 302
    finally:
        assert broker.stop() == 0


def test_signing_out_everywhere_ends_the_users_sessions_through_a_real_logout_token():
    """POST /dev/logout (the page's button, without a browser): the development provider signs a
    logout token and sends it to the broker's back-channel logout endpoint, which verifies it like
    any provider's; a name that is not a valid user is a 400 that sends nothing."""
    broker = BrokerProcess("", args=["--dev"])
    try:
        alice, bob = dev_login(broker, "alice").json()["session_token"], dev_login(broker, "Bob").json()["session_token"]
        status = lambda token: requests.get(broker.url("/token"), headers={"Authorization": f"Bearer {token}"}, timeout=10).status_code
        assert requests.post(broker.url("/dev/logout"), data={"user": "a b"}, timeout=10).status_code == 400
        page = requests.get(broker.url("/dev/logout"), timeout=10)
        assert page.status_code == 200 and 'action="/dev/logout"' in page.text
        signed_out = requests.post(broker.url("/dev/logout"), data={"user": "bob"}, timeout=10)
        assert signed_out.status_code == 200 and "Signed out everywhere" in signed_out.text
        assert (status(alice), status(bob)) == (200, 401), "the name is matched as the sign-in page keeps it (lowercase)"
        accepted = [line for line in broker.json_lines() if line.get("audit") == "backchannel_logout"]
        assert [(line["provider"], line["subject"], line["ended"]) for line in accepted] == [("dev", "dev-bob", 1)]
    finally:
        broker.stop()
