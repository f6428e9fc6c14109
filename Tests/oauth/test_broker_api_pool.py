"""The API proxy as backends use it (docs/api.md, "Connections"): many sessions, a TLS API signed by
a private CA the provider names in `ca_file`, one pool of connections shared by every session —
and, with `api_connections: per_session`, each session's own. Against the real authorization
server; the API is a recording upstream on loopback speaking HTTPS, which counts the connections
it accepts and the TLS sessions resumed on them."""

import concurrent.futures

import pytest
import requests

from support.broker import App
from support.private_ca import PrivateCA
from support.recording_upstream import RecordingUpstream


@pytest.fixture
def private_ca(tmp_path):
    return PrivateCA(tmp_path / "ca")


@pytest.fixture
def tls_api(private_ca):
    server = RecordingUpstream(tls=private_ca.server_context())
    yield server
    server.close()


def api_lines(tls_api, private_ca, extra=""):
    return (f"    api_base_url: {tls_api.base_url}\n    api_allow_private_addresses: true\n"
            f"    ca_file: {private_ca.ca_file}\n{extra}")


# The tests sign many users in from one address.
MANY_SIGN_INS = {"BROKER_LOGIN_REQUESTS_PER_MINUTE": "0"}


def metric(broker, name: str) -> float:
    text = requests.get(broker.url("/metrics"), timeout=10).text
    return next((float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + " ")), 0.0)


def sessions(broker, browser, count: int) -> list[App]:
    apps = []
    for _ in range(count):
        app = App(broker, browser)
        app.login("bob")
        apps.append(app)
    return apps


def test_every_session_shares_the_apis_connections_and_tls_sessions(broker_factory, browser, tls_api, private_ca):
    broker, _, _, _ = broker_factory(provider_extra=api_lines(tls_api, private_ca), env=MANY_SIGN_INS)
    apps = sessions(broker, browser, 12)
    for app in apps:  # each user calls now and then, one after another
        answer = app.call("GET", "/proxy/dot/json")
        assert answer.status_code == 200 and answer.json() == {"ok": True}, answer.text
    assert tls_api.connections == 1, "one connection served every user"
    opened = metric(broker, 'broker_upstream_connections_opened_total{client="api_proxy"}')
    reused = metric(broker, 'broker_upstream_connections_reused_total{client="api_proxy"}')
    assert opened == 1 and reused == 11 and metric(broker, 'broker_upstream_connections_open{client="api_proxy"}') == 1
    # Calls at once open more connections, which resume the TLS session the first one got (those
    # opened at the same instant may each make a full handshake).
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        statuses = list(pool.map(lambda app: app.call("GET", "/proxy/dot/json").status_code, apps))
    assert statuses == [200] * 12
    assert 1 < tls_api.connections <= 7
    assert tls_api.resumed >= 1, (tls_api.resumed, tls_api.connections)


def test_per_session_connections_keep_every_user_apart(broker_factory, browser, tls_api, private_ca):
    broker, _, _, _ = broker_factory(provider_extra=api_lines(tls_api, private_ca, "    api_connections: per_session\n"))
    apps = sessions(broker, browser, 4)
    for _ in range(2):
        for app in apps:
            assert app.call("GET", "/proxy/dot/json").status_code == 200
    assert tls_api.connections == 4, "one connection per session, reused by its own calls only"


def test_an_api_whose_certificate_no_trusted_ca_signed_is_a_502(broker_factory, browser, tls_api, private_ca):
    broker, app, _, _ = broker_factory(provider_extra=f"    api_base_url: {tls_api.base_url}\n    api_allow_private_addresses: true\n")
    app.login()
    answer = app.call("GET", "/proxy/dot/json")
    assert answer.status_code == 502 and answer.json()["error"] == "upstream_error", answer.text
    assert "certificate" in answer.json()["error_description"]
    assert tls_api.count() == 0, "no request went over an unverified connection"


def test_a_backend_calling_for_200_users_at_once_from_one_address_is_never_refused(broker_factory, browser, tls_api, private_ca):
    """Each session within its own bounds: the address's bound counts only answers streaming to
    it, so a backend's calls for many users are all answered (those beyond the running transfers
    wait their turn)."""
    broker, _, _, _ = broker_factory(provider_extra=api_lines(tls_api, private_ca),
                                     env={**MANY_SIGN_INS, "BROKER_MAX_CONNECTIONS_PER_IP": "512"})
    apps = sessions(broker, browser, 200)
    backend = requests.Session()
    backend.mount("http://", requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=200))

    def call(app):
        return backend.get(broker.url("/proxy/dot/json"), headers={"Authorization": f"Bearer {app.session_token}"}, timeout=30).status_code
    with concurrent.futures.ThreadPoolExecutor(200) as pool:
        statuses = list(pool.map(call, apps))
    assert statuses == [200] * 200, {status: statuses.count(status) for status in set(statuses)}
    assert 'reason="proxy_in_flight"' not in requests.get(broker.url("/metrics"), timeout=10).text
    backend.close()


def test_one_providers_ca_file_is_trusted_for_its_calls_alone(broker_factory, browser, auth_server, tls_api, private_ca):
    """Two providers, one HTTPS server: `dot` names the private CA that signed it (`ca_file`),
    `other` does not (and reaches it as 127.0.0.1, an origin `dot`'s configuration does not
    name). On both of the broker's loops — the API proxy's, and the providers' (`GET /profile`
    fetches userinfo) — `other`'s calls fail verification before and after `dot`'s succeed, and
    `dot`'s succeed after `other`'s failed: the first connection's CA store is never reused for
    another provider's."""
    other = (f"\n  other:\n    issuer: {auth_server.issuer}\n    client_id: other-client\n    client_secret_env: DOT_CLIENT_SECRET\n"
             f"    scopes: [openid, profile, email, read]\n    api_base_url: https://127.0.0.1:{tls_api.port}\n"
             f"    api_allow_private_addresses: true\n    userinfo_endpoint: https://127.0.0.1:{tls_api.port}/userinfo\n")
    broker, mine, _, secret = broker_factory(
        provider_extra=api_lines(tls_api, private_ca, f"    userinfo_endpoint: {tls_api.base_url}/userinfo\n") + other, env=MANY_SIGN_INS)
    auth_server.register_client([broker.url("/callback")], client_id="other-client", client_secret=secret)
    theirs = App(broker, browser, provider="other")
    theirs.login("bob")
    mine.login()

    def unverified(answer) -> bool:
        return answer.status_code in (502, 503) and "verif" in answer.json()["error_description"]
    for their_path, my_path in (("/proxy/other/json", "/proxy/dot/json"), ("/profile", "/profile")):
        assert unverified(theirs.call("GET", their_path)), "before the provider with the CA file called"
        answer = mine.call("GET", my_path)
        assert answer.status_code == 200, answer.text
        assert unverified(theirs.call("GET", their_path)), "after the provider with the CA file called"
        assert mine.call("GET", my_path).status_code == 200
    assert {request["path"] for request in tls_api.requests} == {"/json", "/userinfo"}, "only the CA file's provider reached the API"
