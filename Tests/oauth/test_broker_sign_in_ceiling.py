"""The bound on sign-ins under way (`server.limits.max_pending_sign_ins`), on the real broker:
logins at the provider's page and device codes are state anyone can make, so past the ceiling a
new one — at /authorize, the standard authorization endpoint or a device authorization endpoint —
is a 503 with `Retry-After` (a page for a browser; at the standard authorization endpoint, the
app's redirect URI with `error=temporarily_unavailable`, RFC 6749 §4.1.2.1), counted in
`broker_pending_sign_ins`; nothing is stored for it. On PostgreSQL the ceiling counts every
instance's sign-ins together.
"""

import pytest
import requests

from support.broker import BrokerProcess, broker_config, free_port, provider_config, wait_for
from support.pkce import make_pkce
from support.postgres import PostgresCluster

CEILING = 100
LIMITS = {"BROKER_MAX_PENDING_SIGN_INS": str(CEILING), "BROKER_LOGIN_REQUESTS_PER_MINUTE": "0"}


def device_codes(broker):
    return requests.post(broker.url("/device/authorize"), data={"app": "tv", "provider": "dot"}, timeout=10)


def login(broker):
    _, challenge = make_pkce()
    return requests.get(broker.url("/authorize"), allow_redirects=False, timeout=10, params={
        "app": "web", "provider": "dot", "redirect_uri": "http://127.0.0.1/cb", "state": "s",
        "code_challenge": challenge, "code_challenge_method": "S256"})


def standard_login(broker):
    _, challenge = make_pkce()
    return requests.get(broker.url("/providers/dot/authorize"), allow_redirects=False, timeout=10, params={
        "client_id": "web", "response_type": "code", "redirect_uri": "http://127.0.0.1/cb", "state": "s",
        "code_challenge": challenge, "code_challenge_method": "S256"})


def metric(broker, name):
    text = requests.get(broker.url("/metrics"), timeout=10).text
    return next((float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + " ") or line.startswith(name + "{")), None)


def assert_refused(answer):
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"] == "temporarily_unavailable" and answer.headers["Retry-After"] == "60"


def test_past_the_ceiling_no_sign_in_starts(broker_factory):
    broker, _, _, _ = broker_factory(config_extra="  tv:\n    device_flow: true\n", env=LIMITS)
    for index in range(CEILING):
        answer = device_codes(broker) if index % 2 else login(broker)
        assert answer.status_code in (200, 302), answer.text
    for attempt in (login, device_codes):
        assert_refused(attempt(broker))
    # The standard endpoint knows the client and its redirect URI by then: the app hears it.
    back = standard_login(broker)
    assert back.status_code == 302, back.text
    assert back.headers["Location"].startswith("http://127.0.0.1/cb?error=temporarily_unavailable&"), back.headers
    assert "state=s" in back.headers["Location"] and "iss=" in back.headers["Location"]
    # A person at a browser reads a page.
    _, challenge = make_pkce()
    page = requests.get(broker.url("/authorize"), headers={"Accept": "text/html"}, allow_redirects=False, timeout=10, params={
        "app": "web", "provider": "dot", "redirect_uri": "http://127.0.0.1/cb", "code_challenge": challenge, "code_challenge_method": "S256"})
    assert page.status_code == 503 and page.headers["Content-Type"].startswith("text/html"), page.text
    assert "cannot start right now" in page.text and page.headers["Retry-After"] == "60"
    assert metric(broker, "broker_pending_sign_ins") == CEILING
    assert metric(broker, 'broker_rejected_requests_total{route="/device/authorize",reason="pending_sign_ins"}') == 1
    assert "/dot/authorize" in requests.get(broker.url("/metrics"), timeout=10).text


@pytest.fixture(scope="module")
def postgres():
    with PostgresCluster() as cluster:
        yield cluster


def test_on_postgresql_the_ceiling_counts_every_instances_sign_ins(postgres, auth_server):
    """Two instances, half of the ceiling started on each: both refuse the next, once each has
    counted the other's (every 0.25 s while sign-ins start; until then its own count lets a few
    more through, which the test bounds)."""
    ports = [free_port(), free_port()]
    client_id, secret = auth_server.register_client([f"http://127.0.0.1:{ports[0]}/callback"])
    config = broker_config(provider_config(auth_server, client_id)) + "  tv:\n    device_flow: true\n"
    env = {**LIMITS, "DOT_CLIENT_SECRET": secret, "BROKER_STATE_BACKEND": "postgres", "BROKER_POSTGRES_URL": postgres.create_database(),
           "BROKER_POSTGRES_PASSWORD": postgres.password, "BROKER_PUBLIC_URL": f"http://127.0.0.1:{ports[0]}"}
    brokers = [BrokerProcess(config, env=env, port=port) for port in ports]
    try:
        for index in range(CEILING):
            broker = brokers[index % 2]
            answer = device_codes(broker) if index % 4 < 2 else login(broker)
            assert answer.status_code in (200, 302), answer.text
        extra = {0: 0, 1: 0}

        def refuses(which):
            answer = device_codes(brokers[which])
            if answer.status_code == 200:
                extra[which] += 1
                return False
            assert_refused(answer)
            return True
        for which in (0, 1):
            assert wait_for(lambda: refuses(which), timeout=15), f"instance {which} never refused"
        # Each instance lets through at most what it starts before its next count (0.25 s).
        assert sum(extra.values()) <= 10, extra
        assert all(metric(broker, "broker_pending_sign_ins") >= CEILING for broker in brokers)
    finally:
        for broker in brokers:
            broker.stop()
