"""Forced refreshes are bounded: per session (sessions.min_refresh_interval_seconds) and per client
address (server.limits.refresh_requests_per_minute), so that no signed-in client can make the
broker hammer the provider under its one client id."""
import concurrent.futures
import time

import requests
import requests.adapters


def test_forced_refreshes_of_one_session_reach_the_provider_once_per_interval(broker_factory, auth_server):
    broker, app, _, _ = broker_factory()
    tokens = app.login("alice")
    auth_server.reset_stats()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: app.call("GET", "/token", params={"min_ttl": "86400"}), range(120)))
    assert all(a.status_code == 200 for a in answers), {a.status_code for a in answers}
    handed_out = {a.json()["access_token"] for a in answers}
    assert tokens["access_token"] not in handed_out and len(handed_out) == 1, "one new token, then that one while it lives"
    assert auth_server.stats().get("refresh_token") == 1
    # Asking to refresh now, so soon after: 429 with Retry-After, no call to the provider.
    again = app.call("POST", "/refresh")
    assert again.status_code == 429 and again.json()["error"] == "rate_limited"
    assert 1 <= int(again.headers["Retry-After"]) <= 30
    assert "access_token" not in again.json()
    assert auth_server.stats().get("refresh_token") == 1
    # The hot path is untouched: a token that is fresh enough is answered as before.
    assert app.call("GET", "/token").json()["access_token"] in handed_out


def test_an_expired_token_is_refreshed_whatever_the_interval(broker_factory, auth_server):
    broker, app, _, _ = broker_factory()
    auth_server.set_access_token_lifetime(2)  # inside the 60 s skew: every GET /token wants a refresh
    tokens = app.login("alice")
    auth_server.reset_stats()
    first = app.call("GET", "/token").json()["access_token"]
    assert first != tokens["access_token"]
    assert app.call("GET", "/token").json()["access_token"] == first, "still valid: no second refresh yet"
    assert auth_server.stats().get("refresh_token") == 1
    time.sleep(2.5)
    expired = app.call("GET", "/token")
    assert expired.status_code == 200 and expired.json()["access_token"] != first
    assert auth_server.stats().get("refresh_token") == 2


def test_refreshes_are_limited_per_client_address(broker_factory, auth_server):
    broker, app, _, _ = broker_factory(env={"BROKER_MIN_REFRESH_INTERVAL_SECONDS": "0",
                                            "BROKER_REFRESH_REQUESTS_PER_MINUTE": "3"})
    app.login("alice")
    auth_server.reset_stats()
    for _ in range(3):
        assert app.call("POST", "/refresh").status_code == 200
    limited = app.call("POST", "/refresh")
    assert limited.status_code == 429 and limited.json()["error"] == "rate_limited"
    assert 1 <= int(limited.headers["Retry-After"]) <= 20
    forced = app.call("GET", "/token", params={"min_ttl": "86400"})
    assert forced.status_code == 429, "a GET /token that would refresh shares the budget"
    assert app.call("GET", "/token").status_code == 200, "one that needs no refresh does not"
    assert auth_server.stats().get("refresh_token") == 3
    metrics = requests.get(broker.url("/metrics"), timeout=10).text
    assert 'broker_rejected_requests_total{route="/refresh",reason="rate_limited"} 1' in metrics


def test_concurrent_refreshes_with_different_force_and_min_ttl_share_one(broker_factory, auth_server):
    """Plain GET /token, GET /token?min_ttl above the provider's lifetime and POST /refresh, all at
    once on one session: one refresh at the provider; every caller that asked for a refresh gets
    the new token (or, for POST /refresh after it, 429); a plain caller gets the old or the new."""
    broker, app, _, _ = broker_factory()
    tokens = app.login("alice")
    auth_server.reset_stats()
    calls = [("GET", {}), ("GET", {"min_ttl": "86400"}), ("POST", {})] * 30
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda call: (call, app.call(call[0], "/token" if call[0] == "GET" else "/refresh", params=call[1])), calls))
    assert auth_server.stats().get("refresh_token") == 1
    new = {a.json()["access_token"] for (method, params), a in answers if a.status_code == 200 and (params or method == "POST")}
    assert len(new) == 1 and tokens["access_token"] not in new, new
    for (method, params), answer in answers:
        if method == "POST":
            assert answer.status_code in (200, 429), answer.text
        else:
            assert answer.status_code == 200, answer.text
            allowed = new if params else new | {tokens["access_token"]}
            assert answer.json()["access_token"] in allowed
    assert app.call("GET", "/session").status_code == 200


def test_a_backend_reading_many_due_sessions_from_one_address_is_never_refused(broker_factory, auth_server):
    """A backend serving many users from one address (through its one connection pool): its 300
    sign-ins' codes are redeemed from that address under the default limit on refused codes;
    every GET /token whose refresh is due is answered, however many there are in a minute (the
    per-address limit is for refreshes asked early); many callers on one due session share one
    refresh at the provider."""
    # The 300 codes redeemed from one address below are under the default token_requests_per_minute
    # (120), which counts only codes refused.
    broker, app, _, _ = broker_factory(env={"BROKER_LOGIN_REQUESTS_PER_MINUTE": "0", "BROKER_REFRESH_REQUESTS_PER_MINUTE": "120"})
    auth_server.set_access_token_lifetime(2)  # inside the 60 s skew: every GET /token wants a refresh
    tokens = [app.login("alice")["session_token"] for _ in range(300)]
    backend = requests.Session()
    backend.mount("http://", requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=32))

    def read(token):
        answer = backend.get(broker.url("/token"), headers={"Authorization": f"Bearer {token}"}, timeout=30)
        return answer.status_code, answer.json()

    auth_server.reset_stats()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(read, tokens))
    assert [status for status, _ in answers].count(200) == 300, [body for status, body in answers if status != 200][:3]
    assert auth_server.stats().get("refresh_token") == 300
    time.sleep(2.5)
    auth_server.reset_stats()
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(read, [tokens[0]] * 200))
    assert all(status == 200 for status, _ in answers), {status for status, _ in answers}
    assert len({body["access_token"] for _, body in answers}) == 1
    assert auth_server.stats().get("refresh_token") == 1
    metrics = requests.get(broker.url("/metrics"), timeout=10).text
    assert 'broker_rejected_requests_total{route="/token",reason="rate_limited"}' not in metrics
    backend.close()
