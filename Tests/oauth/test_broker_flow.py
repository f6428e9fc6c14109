"""The broker's whole OAuth flow against the real authorization server, through a scripted browser."""
import concurrent.futures
import signal
import time

import requests

from support.browser import Browser, query_params
from support.pkce import make_pkce


def test_full_flow_from_authorize_to_revoke(broker_factory, auth_server):
    broker, app, client_id, _ = broker_factory()
    auth_server.reset_stats()
    tokens = app.login("alice", scope="read")
    assert tokens["session_token"].startswith("tbs_") and len(tokens["session_token"]) >= 47
    assert tokens["token_type"] == "Bearer" and tokens["provider"] == "dot"
    assert 3500 < tokens["expires_in"] <= 3600
    assert set(tokens["scope"].split()) >= {"openid", "profile", "email", "read"}
    assert auth_server.token_active(tokens["access_token"])
    assert auth_server.stats().get("authorization_code") == 1

    current = app.call("GET", "/token")
    assert current.status_code == 200 and current.headers["Cache-Control"] == "no-store"
    assert current.json()["access_token"] == tokens["access_token"]
    assert "session_token" not in current.json()

    session = app.call("GET", "/session").json()
    assert session["provider"] == "dot" and session["refreshable"] is True
    assert session["subject"] == auth_server.users["alice"].sub
    assert session["created_at"].endswith("Z") and session["access_token_expires_at"].endswith("Z")

    profile = app.call("GET", "/profile").json()
    assert profile["sub"] == auth_server.users["alice"].sub
    assert profile["email"] == "alice@example.test" and profile["email_verified"] is True
    assert profile["name"] == "Alice Liddell" and profile["provider"] == "dot"
    assert profile["raw"]["preferred_username"] == "alice"

    refresh_tokens = [t["token"] for t in auth_server.user_tokens("alice", client_id)["refresh_tokens"] if t["active"]]
    revoked = app.call("POST", "/revoke")
    assert revoked.json() == {"revoked": True, "provider_revocation": "succeeded"}
    assert not auth_server.token_active(tokens["access_token"])
    assert refresh_tokens and not any(auth_server.token_active(t) for t in refresh_tokens)
    gone = app.call("GET", "/token")
    assert gone.status_code == 401 and gone.json()["error"] == "invalid_token"
    assert gone.headers["WWW-Authenticate"] == 'Bearer error="invalid_token"'
    again = app.call("POST", "/revoke")
    assert again.status_code == 200 and again.json()["provider_revocation"] == "not_attempted"


def test_authorize_redirects_or_answers_json(broker_factory, auth_server):
    broker, app, client_id, _ = broker_factory()
    url, _ = app.authorize_url()
    redirect = requests.get(url, allow_redirects=False, timeout=10)
    assert redirect.status_code == 302
    location = redirect.headers["Location"]
    assert location.startswith(auth_server.authorization_endpoint)
    params = query_params(location)
    assert params["client_id"] == client_id and params["redirect_uri"] == broker.callback_url
    assert params["code_challenge_method"] == "S256" and params["state"].startswith("tbst_")
    assert params["nonce"] and params["state"] != "app-state-1"
    as_json = requests.get(url, headers={"Accept": "application/json"}, allow_redirects=False, timeout=10)
    assert as_json.status_code == 200
    assert as_json.json()["authorization_url"].startswith(auth_server.authorization_endpoint)


def test_invalid_authorize_input_is_a_json_400_never_a_redirect(broker_factory):
    broker, app, _, _ = broker_factory()
    cases = {
        "unregistered redirect_uri": {"redirect_uri": "https://evil.example/cb"},
        "plain PKCE": {"code_challenge_method": "plain"},
        "short challenge": {"code_challenge": "abc"},
        "unknown provider": {"provider": "nope"},
        "unknown app": {"app": "nope"},
    }
    for name, override in cases.items():
        url, _ = app.authorize_url(**override)
        response = requests.get(url, allow_redirects=False, timeout=10)
        assert response.status_code == 400, name
        assert "Location" not in response.headers, name
        assert response.json()["error"] == "invalid_request", name
    repeated = requests.get(app.authorize_url()[0] + "&state=twice", allow_redirects=False, timeout=10)
    assert repeated.status_code == 400


def test_consent_denied_goes_back_to_the_app(broker_factory):
    broker, app, _, _ = broker_factory()
    params, _ = app.sign_in("alice", consent=False, state="s-denied")
    assert params["error"] == "access_denied" and params["state"] == "s-denied"
    assert "code" not in params


def test_replayed_and_unknown_state_are_400(broker_factory, auth_server):
    broker, app, _, _ = broker_factory()
    url, _ = app.authorize_url()
    provider_url = requests.get(url, allow_redirects=False, timeout=10).headers["Location"]
    browser = Browser(allowed_hosts=[auth_server.host])
    callback = browser.authorize(provider_url, "alice", "alice-password")
    assert callback.startswith(broker.callback_url)
    first = requests.get(callback, allow_redirects=False, timeout=30)
    assert first.status_code == 302 and first.headers["Location"].startswith(app.redirect_uri)
    replay = requests.get(callback, allow_redirects=False, timeout=30)
    assert replay.status_code == 400 and "Location" not in replay.headers
    assert replay.json()["error"] == "invalid_request"
    html = requests.get(callback, headers={"Accept": "text/html"}, allow_redirects=False, timeout=30)
    assert html.status_code == 400 and html.headers["Content-Type"].startswith("text/html")
    assert "frame-ancestors 'none'" in html.headers["Content-Security-Policy"]
    unknown = requests.get(broker.url("/callback?state=tbst_unknown&code=x"), allow_redirects=False, timeout=10)
    assert unknown.status_code == 400


def test_replayed_handoff_code_is_rejected_and_revokes_the_session(broker_factory):
    broker, app, _, _ = broker_factory()
    params, verifier = app.sign_in("alice")
    first = app.redeem(params["code"], verifier)
    assert first.status_code == 200
    token = first.json()["session_token"]
    assert app.call("GET", "/session", token).status_code == 200
    replay = app.redeem(params["code"], verifier)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert app.call("GET", "/session", token).status_code == 401


def test_replayed_handoff_code_revokes_the_tokens_at_the_provider(broker_factory, auth_server):
    """The winner of a leaked code holds the provider's access token: the replay kills it there too."""
    broker, app, client_id, _ = broker_factory()
    params, verifier = app.sign_in("alice")
    first = app.redeem(params["code"], verifier)
    assert first.status_code == 200
    access_token = first.json()["access_token"]
    refresh_tokens = [t["token"] for t in auth_server.user_tokens("alice", client_id)["refresh_tokens"] if t["active"]]
    assert auth_server.token_active(access_token) and refresh_tokens
    userinfo = requests.get(auth_server.userinfo_endpoint, headers={"Authorization": f"Bearer {access_token}"}, timeout=10)
    assert userinfo.status_code == 200  # the negative control: the provider honours it before the replay
    replay = app.redeem(params["code"], verifier)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert not auth_server.token_active(access_token)
    assert not any(auth_server.token_active(t) for t in refresh_tokens)
    userinfo = requests.get(auth_server.userinfo_endpoint, headers={"Authorization": f"Bearer {access_token}"}, timeout=10)
    assert userinfo.status_code in (401, 403)


def test_wrong_code_verifier_or_binding_is_invalid_grant(broker_factory):
    broker, app, _, _ = broker_factory()
    params, verifier = app.sign_in("alice")
    wrong = app.redeem(params["code"], verifier[:-1] + ("A" if verifier[-1] != "A" else "B"))
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
    other_uri = app.redeem(params["code"], verifier, redirect_uri="http://127.0.0.1:9/other")
    assert other_uri.status_code == 400 and other_uri.json()["error"] == "invalid_grant"
    # Refused twice, the code is still its app's: whoever sent the wrong ones cannot spend it.
    assert app.redeem(params["code"], verifier).status_code == 200
    # The third refusal spends it: then not even the app's own verifier helps.
    params, verifier = app.sign_in("alice")
    for _ in range(3):
        assert app.redeem(params["code"], make_pkce()[0]).json()["error"] == "invalid_grant"
    spent = app.redeem(params["code"], verifier)
    assert spent.status_code == 400 and "refused too often" in spent.json()["error_description"], spent.text
    bad_grant = app.redeem("x", verifier, grant_type="password")
    assert bad_grant.status_code == 400 and bad_grant.json()["error"] == "unsupported_grant_type"
    # A verifier that is not one (RFC 7636 §4.1) is said to be malformed, and spends nothing.
    params, verifier = app.sign_in("alice")
    malformed = app.redeem(params["code"], "too-short")
    assert malformed.status_code == 400 and malformed.json()["error"] == "invalid_request"
    assert "malformed" in malformed.json()["error_description"]
    assert app.redeem(params["code"], verifier).status_code == 200


def test_codes_that_work_are_never_limited_per_address_and_guesses_are(broker_factory):
    """`token_requests_per_minute` counts the codes refused as invalid_grant per client address,
    at both token endpoints: a backend redeeming the codes of many users from one address spends
    nothing with codes that work; guesses and wrong verifiers spend the budget, and then the
    address's next code waits (429, counted) without being spent: it works once the budget
    refills."""
    broker, app, _, _ = broker_factory(env={"BROKER_TOKEN_REQUESTS_PER_MINUTE": "6"})
    # Twice the budget of codes that work, from one address.
    sessions = {app.login("alice")["session_token"] for _ in range(12)}
    assert len(sessions) == 12
    params, verifier = app.sign_in("alice")  # a good code, kept for after the guesses
    spent, spent_verifier = app.sign_in("alice")
    wrong = app.redeem(spent["code"], spent_verifier[:-1] + ("A" if spent_verifier[-1] != "A" else "B"))
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant", wrong.text
    for n in range(4):
        guess = app.redeem(f"guessed-{n}", verifier)
        assert guess.status_code == 400 and guess.json()["error"] == "invalid_grant", guess.text
    standard_form = {"grant_type": "authorization_code", "code": "guessed-standard", "code_verifier": verifier,
                     "redirect_uri": app.redirect_uri, "client_id": app.app}
    guess = requests.post(broker.url("/providers/dot/token"), data=standard_form, timeout=10)
    assert guess.status_code == 400 and guess.json()["error"] == "invalid_grant", guess.text
    limited = app.redeem(params["code"], verifier)
    assert limited.status_code == 429 and limited.json()["error"] == "rate_limited", limited.text
    assert 1 <= int(limited.headers["Retry-After"]) <= 10
    standard = requests.post(broker.url("/providers/dot/token"), data={**standard_form, "code": params["code"]}, timeout=10)
    assert standard.status_code == 429 and standard.json()["error"] == "rate_limited", standard.text
    metrics = requests.get(broker.url("/metrics"), timeout=10).text.splitlines()
    assert 'broker_rejected_requests_total{route="/token",reason="rate_limited"} 1' in metrics
    time.sleep(int(limited.headers["Retry-After"]) + 0.5)
    later = app.redeem(params["code"], verifier)
    assert later.status_code == 200 and later.json()["session_token"] not in sessions, later.text


def test_refresh_rotates_the_refresh_token(broker_factory, auth_server):
    broker, app, client_id, secret = broker_factory()
    tokens = app.login("alice")
    before = [t["token"] for t in auth_server.user_tokens("alice", client_id)["refresh_tokens"] if t["active"]]
    assert len(before) == 1
    refreshed = app.call("POST", "/refresh")
    assert refreshed.status_code == 200
    assert refreshed.json()["access_token"] != tokens["access_token"]
    after = [t["token"] for t in auth_server.user_tokens("alice", client_id)["refresh_tokens"] if t["active"]]
    assert len(after) == 1 and after != before
    old = requests.post(auth_server.token_endpoint, data={"grant_type": "refresh_token", "refresh_token": before[0]},
                        auth=(client_id, secret), timeout=10)
    assert old.status_code == 400 and old.json()["error"] == "invalid_grant"


def test_concurrent_token_requests_share_one_refresh(broker_factory, auth_server):
    broker, app, _, _ = broker_factory()
    auth_server.set_access_token_lifetime(30)  # inside the 60 s skew: the next GET /token refreshes
    tokens = app.login("alice")
    auth_server.reset_stats()
    auth_server.inject_fault("token", delay=1.0, count=5)
    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(lambda _: app.call("GET", "/token"), range(20)))
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    assert len({a.json()["access_token"] for a in answers}) == 1
    assert answers[0].json()["access_token"] != tokens["access_token"]
    assert auth_server.stats().get("refresh_token") == 1
    metrics = requests.get(broker.url("/metrics"), timeout=10).text
    assert 'broker_refreshes_total{provider="dot",outcome="refreshed"} 1' in metrics


def test_revoked_grant_means_login_required(broker_factory, auth_server):
    broker, app, client_id, _ = broker_factory()
    app.login("alice")
    auth_server.revoke_user("alice", client_id)
    refresh = app.call("POST", "/refresh")
    assert refresh.status_code == 401 and refresh.json()["error"] == "login_required"
    assert refresh.headers["WWW-Authenticate"] == 'Bearer error="invalid_token"'
    assert app.call("GET", "/session").status_code == 401


def test_transient_refresh_failure_keeps_the_session(broker_factory, auth_server):
    broker, app, _, _ = broker_factory()
    tokens = app.login("alice")
    auth_server.inject_fault("token", status=503, body="down", count=1)
    failed = app.call("POST", "/refresh")
    assert failed.status_code in (502, 503)
    assert failed.json()["error"] in ("upstream_error", "upstream_unavailable")
    current = app.call("GET", "/token")
    assert current.status_code == 200 and current.json()["access_token"] == tokens["access_token"]


def test_min_ttl_forces_a_refresh(broker_factory, auth_server):
    broker, app, _, _ = broker_factory()
    tokens = app.login("alice")
    auth_server.reset_stats()
    same = app.call("GET", "/token", params={"min_ttl": "60"})
    assert same.json()["access_token"] == tokens["access_token"]
    forced = app.call("GET", "/token", params={"min_ttl": "7200"})
    assert forced.status_code == 200 and forced.json()["access_token"] != tokens["access_token"]
    assert auth_server.stats().get("refresh_token") == 1
    bad = app.call("GET", "/token", params={"min_ttl": "soon"})
    assert bad.status_code == 400
    # An unknown session is reported before a bad min_ttl: the client must sign in again.
    unknown = app.call("GET", "/token", token="tbs_" + "x" * 43, params={"min_ttl": "soon"})
    assert unknown.status_code == 401 and unknown.json()["error"] == "invalid_token"


def test_incremental_authorization_merges_scopes(broker_factory, auth_server):
    broker, app, _, _ = broker_factory()
    first = app.login("alice", scope="read")
    assert "write" not in first["scope"].split()
    verifier, challenge = make_pkce()
    started = app.call("POST", "/authorize", data={
        "scope": "write", "redirect_uri": app.redirect_uri, "code_challenge": challenge,
        "code_challenge_method": "S256", "state": "more",
    })
    assert started.status_code == 200, started.text
    location = app.browser.authorize(started.json()["authorization_url"], "alice", "alice-password")
    params = query_params(location)
    assert params["state"] == "more"
    redeemed = app.redeem(params["code"], verifier)
    assert redeemed.status_code == 200, redeemed.text
    assert "session_token" not in redeemed.json()
    assert "write" in redeemed.json()["scope"].split()
    session = app.call("GET", "/session").json()
    assert {"read", "write", "openid"} <= set(session["scopes"])


def test_unknown_bearer_tokens_are_401(broker_factory):
    broker, app, _, _ = broker_factory()
    for path in ("/token", "/session", "/profile"):
        for header in ({}, {"Authorization": "Bearer tbs_forged"}, {"Authorization": "Basic abc"}):
            response = requests.get(broker.url(path), headers=header, timeout=10)
            assert response.status_code == 401, (path, header)
            assert response.headers["WWW-Authenticate"] == 'Bearer error="invalid_token"'


def test_no_secret_reaches_logs_error_bodies_or_metrics(broker_factory, auth_server):
    """Every secret, token, code and verifier of a full run, searched for in everything the broker
    printed, every error body it sent, and its metrics: zero hits."""
    broker, app, client_id, secret = broker_factory()
    secrets = {secret}
    error_bodies = []

    def remember_error(response):
        if response.status_code >= 400:
            error_bodies.append(response.text)
        return response

    url, verifier = app.authorize_url(state="app-state-secret-1")
    provider_url = requests.get(url, allow_redirects=False, timeout=10).headers["Location"]
    secrets.add(query_params(provider_url)["state"])  # the broker's own state
    callback = Browser(allowed_hosts=[auth_server.host]).authorize(provider_url, "alice", "alice-password")
    secrets.add(query_params(callback)["code"])  # the provider's authorization code
    back = requests.get(callback, allow_redirects=False, timeout=30).headers["Location"]
    handoff = query_params(back)["code"]
    secrets |= {handoff, verifier}
    tokens = app.redeem(handoff, verifier).json()
    app.session_token = tokens["session_token"]
    secrets |= {tokens["session_token"], tokens["access_token"]}
    secrets.add(app.call("POST", "/refresh").json()["access_token"])
    app.call("GET", "/profile")
    # Error paths that see secrets: replayed code, wrong verifier, forged and misused tokens.
    remember_error(app.redeem(handoff, verifier))
    remember_error(app.redeem(handoff, "x" * 43))
    remember_error(app.call("GET", "/token", token=tokens["session_token"] + "x"))
    remember_error(app.call("GET", "/token", token=tokens["access_token"]))
    remember_error(requests.get(callback, allow_redirects=False, timeout=30))
    remember_error(requests.get(broker.url("/authorize?code=" + handoff), timeout=10))
    server_tokens = auth_server.user_tokens("alice", client_id)
    secrets |= {t["token"] for t in server_tokens["access_tokens"] + server_tokens["refresh_tokens"]}
    metrics = requests.get(broker.url("/metrics"), timeout=10).text
    app.call("POST", "/revoke")
    assert broker.stop(signal.SIGTERM) == 0
    assert broker.lines, "the broker logged nothing"
    assert len(error_bodies) == 6
    haystacks = {"log": broker.log_text, "metrics": metrics, "error bodies": "\n".join(error_bodies)}
    leaks = [(where, s[:12]) for s in secrets if len(s) >= 8 for where, text in haystacks.items() if s in text]
    assert not leaks


def test_profile_refreshes_once_when_the_provider_rejects_the_token(broker_factory, auth_server):
    broker, app, _, _ = broker_factory(env={"BROKER_PROFILE_CACHE_SECONDS": "0"})
    tokens = app.login("alice")
    auth_server.expire_access_token(tokens["access_token"])  # the broker still believes it is good
    auth_server.reset_stats()
    profile = app.call("GET", "/profile")
    assert profile.status_code == 200, profile.text
    assert profile.json()["sub"] == auth_server.users["alice"].sub
    assert auth_server.stats().get("refresh_token") == 1
    assert app.call("GET", "/token").json()["access_token"] != tokens["access_token"]


def test_metrics_cover_logins_redemptions_provider_calls_and_state(broker_factory):
    broker, app, _, _ = broker_factory()
    app.login("alice")
    params, verifier = app.sign_in("alice", consent=False)
    app.redeem("tbh_unknown", verifier)
    app.call("GET", "/profile")
    metrics = requests.get(broker.url("/metrics"), timeout=10).text
    for line in (
        'broker_logins_total{provider="dot",outcome="started"} 2',
        'broker_logins_total{provider="dot",outcome="completed"} 1',
        'broker_logins_total{provider="dot",outcome="denied"} 1',
        'broker_handoff_redemptions_total{outcome="redeemed"} 1',
        'broker_handoff_redemptions_total{outcome="unknown"} 1',
        'broker_upstream_request_duration_seconds_count{provider="dot",endpoint="token"} 1',
        'broker_upstream_request_duration_seconds_count{provider="dot",endpoint="userinfo"} 1',
        "broker_sessions 1",
    ):
        assert line in metrics, line
    assert "broker_journal_commit_duration_seconds_count" in metrics
