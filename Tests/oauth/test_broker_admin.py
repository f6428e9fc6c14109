"""The admin API against the real authorization server: on the public listener behind its token
(embedded store), and on a listener of its own on each of three instances sharing PostgreSQL.
A missing or wrong credential is a 401 that changes nothing; listings carry metadata and never a
token; ending one session, or every session of a subject, ends it on every instance and revokes
its tokens at the provider; every call is an audit line.
"""

import pytest
import requests

from support.broker import ADMIN_TOKEN, App, BrokerProcess, broker_config, free_port, provider_config, wait_for
from support.browser import Browser
from support.postgres import PostgresCluster

METADATA = {"id", "app", "provider", "subject", "sid", "scopes", "created_at", "used_at"}


@pytest.fixture(scope="module")
def postgres():
    with PostgresCluster() as cluster:
        yield cluster


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def admin(token=ADMIN_TOKEN):
    return bearer(token) if token else {}


def audit_lines(broker, action):
    return [line for line in broker.json_lines() if line.get("audit") == action]


def audit_count(broker, action):
    """`broker_audit_events_total` for `action` (0 when it has not happened), from the admin
    listener's /metrics where there is one."""
    wanted = f'broker_audit_events_total{{action="{action}"}} '
    admin_url = getattr(broker, "admin_url", None)
    text = requests.get(admin_url + "/metrics" if admin_url else broker.url("/metrics"), timeout=10).text
    return next((float(line[len(wanted):]) for line in text.splitlines() if line.startswith(wanted)), 0.0)


def sign_in(broker, auth_server, username, callback=None):
    """A session of `username` through `broker`, in a browser of its own (one provider login
    each), with the user's id at the provider as `subject`. The provider sends the browser back
    to `callback` (the instance the public URL names), else to `broker`."""
    browser = Browser(allowed_hosts=[auth_server.host] + ([callback.host] if callback else []))
    try:
        app = App(broker, browser)
        session = app.login(username)
        session["subject"] = app.call("GET", "/session").json()["subject"]
        return session
    finally:
        browser.close()


def test_on_the_public_listener_a_missing_or_wrong_token_is_401_and_changes_nothing(broker_factory, auth_server, token_file):
    broker, app, _, _ = broker_factory(env={"BROKER_ADMIN_TOKEN_FILE": token_file})
    session = app.login("alice")["session_token"]
    alice = app.call("GET", "/session").json()["subject"]
    listed = requests.get(broker.url("/admin/sessions"), headers=admin(), params={"provider": "dot", "subject": alice}, timeout=10)
    assert listed.status_code == 200, listed.text
    [entry] = listed.json()["sessions"]
    for headers in ({}, admin("wrong-" + ADMIN_TOKEN), admin(ADMIN_TOKEN[:-1]), bearer(session), {"Authorization": ADMIN_TOKEN}):
        for method, path, data in (("GET", "/admin/sessions", None), ("POST", "/admin/sessions/end", {"session": entry["id"]}),
                                   ("POST", "/admin/subjects/end", {"provider": "dot", "subject": alice})):
            refused = requests.request(method, broker.url(path), headers=headers, data=data, timeout=10)
            assert refused.status_code == 401, (path, refused.text)
            assert refused.json()["error"] == "invalid_token"
            assert refused.headers["WWW-Authenticate"].startswith("Bearer")
            assert ADMIN_TOKEN not in refused.text and entry["id"] not in refused.text
    assert app.call("GET", "/token").status_code == 200, "the session was not ended"
    again = requests.get(broker.url("/admin/sessions"), headers=admin(), params={"provider": "dot", "subject": alice}, timeout=10)
    assert again.json()["sessions"] == [entry]
    assert len(audit_lines(broker, "admin.refused")) == 15
    assert audit_count(broker, "admin.refused") == 15 and audit_count(broker, "admin.session_ended") == 0
    assert ADMIN_TOKEN not in broker.log_text and session not in broker.log_text


def test_on_the_public_listener_list_and_end_one_session_with_the_embedded_store(broker_factory, auth_server, token_file):
    broker, app, _, _ = broker_factory(env={"BROKER_ADMIN_TOKEN_FILE": token_file})
    first = app.login("alice")
    second = sign_in(broker, auth_server, "alice")
    bob = sign_in(broker, auth_server, "bob")
    alice = second["subject"]
    assert alice != bob["subject"]
    listed = requests.get(broker.url("/admin/sessions"), headers=admin(), params={"provider": "dot", "subject": alice}, timeout=10)
    assert listed.status_code == 200 and listed.headers["Cache-Control"] == "no-store"
    sessions = listed.json()["sessions"]
    assert len(sessions) == 2 and listed.json()["next"] is None
    for entry in sessions:
        assert set(entry) == METADATA and entry["app"] == "web" and entry["provider"] == "dot" and entry["subject"] == alice
        assert "openid" in entry["scopes"] and entry["sid"] is None  # django-oauth-toolkit's ID tokens carry no sid
    for secret in (first["session_token"], first["access_token"], second["session_token"], second["access_token"]):
        assert secret not in listed.text
    everyone = requests.get(broker.url("/admin/sessions"), headers=admin(), params={"app": "web"}, timeout=10).json()["sessions"]
    assert len(everyone) == 3
    paged = requests.get(broker.url("/admin/sessions"), headers=admin(), params={"provider": "dot", "limit": "2"}, timeout=10).json()
    rest = requests.get(broker.url("/admin/sessions"), headers=admin(), params={"provider": "dot", "after": paged["next"]}, timeout=10).json()
    assert len(paged["sessions"]) == 2 and len(rest["sessions"]) == 1 and rest["next"] is None
    assert {s["id"] for s in paged["sessions"] + rest["sessions"]} == {s["id"] for s in everyone}
    for bad in ({"subject": "alice"}, {"provider": "nope"}, {"app": "nope"}, {"limit": "0"}, {"after": "xyz"}):
        answer = requests.get(broker.url("/admin/sessions"), headers=admin(), params=bad, timeout=10)
        assert answer.status_code == 400 and answer.json()["error"] == "invalid_request", (bad, answer.text)

    # Which one is the first session: the one that stops answering once ended.
    ended = requests.post(broker.url("/admin/sessions/end"), headers=admin(), data={"session": sessions[0]["id"]}, timeout=10)
    assert ended.status_code == 200 and ended.json() == {"ended": True, "provider_revocation": "succeeded"}, ended.text
    statuses = sorted(app.call("GET", "/token", token=s["session_token"]).status_code for s in (first, second))
    assert statuses == [200, 401]
    gone = first if app.call("GET", "/token", token=first["session_token"]).status_code == 401 else second
    assert requests.get(auth_server.userinfo_endpoint, headers=bearer(gone["access_token"]), timeout=10).status_code == 401
    again = requests.post(broker.url("/admin/sessions/end"), headers=admin(), data={"session": sessions[0]["id"]}, timeout=10)
    assert again.json() == {"ended": False, "provider_revocation": "not_attempted"}
    assert app.call("GET", "/token", token=bob["session_token"]).status_code == 200
    [line] = [l for l in audit_lines(broker, "admin.session_ended") if l["ended"] is True]
    assert line["session"] == sessions[0]["id"] and line["subject"] == alice and line["provider_revocation"] == "succeeded"
    assert audit_lines(broker, "admin.sessions_listed")
    # Each action counted by name, as operators alert on them.
    assert audit_count(broker, "admin.session_ended") == 2 and audit_count(broker, "admin.sessions_listed") == 4


@pytest.fixture
def three_instances(postgres, auth_server, token_file):
    """Three brokers on one database, each with the admin API on a loopback listener of its own
    (the first and second also behind the token; the third without: loopback only, and /metrics
    there only)."""
    ports = [free_port() for _ in range(3)]
    client_id, secret = auth_server.register_client([f"http://127.0.0.1:{ports[1]}/callback"])
    config = broker_config(provider_config(auth_server, client_id))
    env = {
        "DOT_CLIENT_SECRET": secret, "BROKER_STATE_BACKEND": "postgres", "BROKER_POSTGRES_URL": postgres.create_database(),
        "BROKER_POSTGRES_PASSWORD": postgres.password, "BROKER_PUBLIC_URL": f"http://127.0.0.1:{ports[1]}",
    }
    brokers = []
    for index, port in enumerate(ports):
        admin_port = free_port()
        extra = {"BROKER_ADMIN_LISTEN": f"127.0.0.1:{admin_port}"}
        if index < 2:
            extra["BROKER_ADMIN_TOKEN_FILE"] = token_file
        else:
            extra["BROKER_ADMIN_METRICS_ONLY"] = "true"
        broker = BrokerProcess(config, env={**env, **extra}, port=port)
        broker.admin_url = f"http://127.0.0.1:{admin_port}"
        brokers.append(broker)
    yield brokers
    for broker in brokers:
        broker.stop()


def test_a_subjects_sessions_end_on_all_three_instances_and_at_the_provider(three_instances, auth_server):
    brokers = three_instances
    alice = [sign_in(broker, auth_server, "alice", callback=brokers[1]) for broker in brokers]  # one begun on each instance
    bob = sign_in(brokers[0], auth_server, "bob", callback=brokers[1])
    subject = alice[0]["subject"]
    for session in alice + [bob]:
        for broker in brokers:  # every instance caches every session
            assert requests.get(broker.url("/token"), headers=bearer(session["session_token"]), timeout=10).status_code == 200

    # The public listener has no admin API when it has a listener of its own.
    assert requests.get(brokers[0].url("/admin/sessions"), headers=admin(), timeout=10).status_code == 404
    # /metrics is on both listeners, without the admin token (Prometheus is not an operator);
    # with admin.metrics_only, on the admin listener only.
    for broker, public in ((brokers[0], 200), (brokers[2], 404)):
        assert requests.get(broker.url("/metrics"), timeout=10).status_code == public
        scraped = requests.get(broker.admin_url + "/metrics", timeout=10)
        assert scraped.status_code == 200 and "broker_http_requests_total" in scraped.text
    refused = requests.post(brokers[0].admin_url + "/admin/subjects/end", data={"provider": "dot", "subject": subject}, timeout=10)
    assert refused.status_code == 401
    assert all(requests.get(b.url("/token"), headers=bearer(alice[0]["session_token"]), timeout=10).status_code == 200 for b in brokers)

    listed = requests.get(brokers[1].admin_url + "/admin/sessions", headers=admin(), params={"provider": "dot", "subject": subject}, timeout=10)
    assert listed.status_code == 200 and len(listed.json()["sessions"]) == 3, listed.text
    mine = requests.get(brokers[2].admin_url + "/admin/sessions", params={"provider": "dot", "subject": bob["subject"]}, timeout=10)
    assert [entry["subject"] for entry in mine.json()["sessions"]] == [bob["subject"]], "the third: loopback, no token"

    ended = requests.post(brokers[1].admin_url + "/admin/subjects/end", headers=admin(), data={"provider": "dot", "subject": subject}, timeout=30)
    assert ended.status_code == 200, ended.text
    assert ended.json() == {"ended": 3, "pending_sign_ins_ended": 0, "provider_revocation": {"succeeded": 3, "queued": 0, "not_supported": 0}}
    for session in alice:
        for broker in brokers:
            assert wait_for(lambda: requests.get(broker.url("/token"), headers=bearer(session["session_token"]), timeout=10).status_code == 401, 2), \
                f"a session of alice still answers on {broker.base_url}"
        assert requests.get(auth_server.userinfo_endpoint, headers=bearer(session["access_token"]), timeout=10).status_code == 401
    for broker in brokers:
        assert requests.get(broker.url("/token"), headers=bearer(bob["session_token"]), timeout=10).status_code == 200
    again = requests.post(brokers[0].admin_url + "/admin/subjects/end", headers=admin(), data={"provider": "dot", "subject": subject}, timeout=10)
    assert again.json()["ended"] == 0
    [line] = [l for l in audit_lines(brokers[1], "admin.subject_ended")]
    assert line["subject"] == subject and line["ended"] == 3 and len(line["sessions"]) == 3
    # Each instance counts the actions it took (its metrics are its own).
    assert [audit_count(b, "admin.subject_ended") for b in brokers] == [1, 1, 0]
    assert [audit_count(b, "admin.refused") for b in brokers] == [1, 0, 0]
    for broker in brokers:
        for session in alice + [bob]:
            assert session["session_token"] not in broker.log_text and session["access_token"] not in broker.log_text
