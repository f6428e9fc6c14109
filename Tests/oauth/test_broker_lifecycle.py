"""The lifecycle of a grant (docs/lifecycle.md) end to end: three broker processes on one
PostgreSQL database behind no stickiness, each step of a flow on another instance, against the
real authorization server (django-oauth-toolkit), whose own records say what is still live.

An admin's end of a user reaches the sign-ins under way — a handoff code not yet redeemed, a device
signed in and not yet polled — and revokes their grants at the provider; a code refused with the
wrong verifier is still its app's, until the third refusal; a revocation the provider does not
take waits in the queue, across an instance's stop, and is delivered when the provider is back;
on the embedded store, across a restart.
"""


import pytest
import requests

from support.broker import ADMIN_TOKEN, App, BrokerProcess, broker_config, free_port, provider_config, wait_for
from support.browser import Browser
from support.device import DeviceClient, DevicePerson
from support.pkce import make_pkce
from support.postgres import PostgresCluster


@pytest.fixture(scope="module")
def postgres():
    with PostgresCluster() as cluster:
        yield cluster


@pytest.fixture
def instances(postgres, auth_server, browser, token_file):
    """Three brokers on a fresh database, one public URL (the second's /callback), the admin API
    on each behind its token; the client's id at the provider."""
    ports = [free_port() for _ in range(3)]
    client_id, secret = auth_server.register_client([f"http://127.0.0.1:{ports[1]}/callback"])
    config = broker_config(provider_config(auth_server, client_id)) + "  tv:\n    device_flow: true\n"
    env = {
        "DOT_CLIENT_SECRET": secret, "BROKER_STATE_BACKEND": "postgres", "BROKER_POSTGRES_URL": postgres.create_database(),
        "BROKER_POSTGRES_PASSWORD": postgres.password, "BROKER_PUBLIC_URL": f"http://127.0.0.1:{ports[1]}",
        "BROKER_ADMIN_TOKEN_FILE": token_file,
    }
    brokers = [BrokerProcess(config, env=env, port=port) for port in ports]
    yield brokers, [App(broker, browser) for broker in brokers], client_id
    for broker in brokers:
        broker.stop()


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def end_subject(broker, subject):
    answer = requests.post(broker.url("/admin/subjects/end"), headers=bearer(ADMIN_TOKEN),
                           data={"provider": "dot", "subject": subject}, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def live_tokens(auth_server, username, client_id):
    """The access and refresh tokens the provider still honours for `username` at this client."""
    tokens = auth_server.user_tokens(username, client_id)
    return [t["token"] for t in tokens["access_tokens"] + tokens["refresh_tokens"] if t["active"]]


def signed_in(brokers, auth_server, username):
    """`username`'s sign-in begun on the first instance, called back on the second (the public
    URL's), in a browser of their own (one provider login each): the app's redirect parameters
    and its verifier."""
    browser = Browser(allowed_hosts=[auth_server.host, brokers[1].host])
    try:
        return App(brokers[0], browser).sign_in(username)
    finally:
        browser.close()


def subject_of(auth_server, username, apps):
    """The provider's `sub` of `username`, from a session of theirs (then revoked)."""
    session = apps[0].login(username)
    subject = apps[0].call("GET", "/session", token=session["session_token"]).json()["subject"]
    assert apps[0].call("POST", "/revoke", token=session["session_token"]).json()["provider_revocation"] == "succeeded"
    return subject


def audit_lines(brokers, action, **fields):
    return [line for broker in brokers for line in broker.json_lines()
            if line.get("audit") == action and all(line.get(name) == value for name, value in fields.items())]


def test_an_admins_end_of_a_user_reaches_a_code_not_yet_redeemed(instances, auth_server):
    brokers, apps, client_id = instances
    subject = subject_of(auth_server, "alice", apps)
    params, verifier = signed_in(brokers, auth_server, "alice")
    bobs, bobs_verifier = signed_in(brokers, auth_server, "bob")
    assert len(live_tokens(auth_server, "alice", client_id)) == 2, "the code's grant is live at the provider"
    ended = end_subject(brokers[2], subject)
    assert ended == {"ended": 0, "pending_sign_ins_ended": 1, "provider_revocation": {"succeeded": 1, "queued": 0, "not_supported": 0}}
    refused = apps[0].redeem(params["code"], verifier)
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant", refused.text
    assert "signed out" in refused.json()["error_description"]
    assert live_tokens(auth_server, "alice", client_id) == [], "revoked at the provider"
    assert apps[1].redeem(bobs["code"], bobs_verifier).status_code == 200, "another user's sign-in goes on"
    [line] = audit_lines(brokers, "session.ended", held_by="handoff_code")
    assert line["reason"] == "admin" and line["subject"] == subject
    for broker in brokers:
        assert params["code"] not in broker.log_text and verifier not in broker.log_text


def test_an_admins_end_of_a_user_reaches_a_device_not_yet_polled(instances, auth_server):
    brokers, apps, client_id = instances
    subject = subject_of(auth_server, "alice", apps)
    device = DeviceClient(brokers[0])
    codes = device.request_codes()
    person = DevicePerson(brokers[2], auth_server)
    try:
        assert "Device signed in" in person.approve(codes["user_code"]).text
    finally:
        person.close()
    assert len(live_tokens(auth_server, "alice", client_id)) == 2
    ended = end_subject(brokers[0], subject)
    assert ended["pending_sign_ins_ended"] == 1 and ended["provider_revocation"]["succeeded"] == 1, ended
    device.broker = brokers[1]
    answer = device.poll()
    assert answer.status_code == 400 and answer.json()["error"] == "access_denied", answer.text
    assert "signed out" in answer.json()["error_description"]
    assert live_tokens(auth_server, "alice", client_id) == []


def test_a_code_refused_with_a_wrong_verifier_is_still_its_apps_until_the_third_refusal(instances, auth_server):
    brokers, apps, client_id = instances
    params, verifier = apps[0].sign_in("alice")
    for app in apps[1:]:
        wrong = app.redeem(params["code"], make_pkce()[0])
        assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant", wrong.text
    redeemed = apps[0].redeem(params["code"], verifier)
    assert redeemed.status_code == 200, redeemed.text
    assert len(audit_lines(brokers, "handoff_code.refused")) == 2

    params, verifier = signed_in(brokers, auth_server, "bob")
    for app in apps:  # three refusals, one on each instance
        assert app.redeem(params["code"], make_pkce()[0]).status_code == 400
    late = apps[1].redeem(params["code"], verifier)
    assert late.status_code == 400 and "refused too often" in late.json()["error_description"], late.text
    assert wait_for(lambda: live_tokens(auth_server, "bob", client_id) == [], 30), "the spent code's grant is revoked by the queue"
    [line] = audit_lines(brokers, "session.ended", held_by="handoff_code")
    assert line["reason"] == "code_refused"


def test_a_revocation_the_provider_does_not_take_is_delivered_when_it_is_back(instances, auth_server):
    brokers, apps, client_id = instances
    session = apps[0].login("alice")
    auth_server.inject_fault("revoke", status=503, count=None)
    revoked = apps[1].call("POST", "/revoke", token=session["session_token"])
    assert revoked.status_code == 200 and revoked.json() == {"revoked": True, "provider_revocation": "queued"}, revoked.text
    for broker in brokers:
        assert wait_for(lambda: requests.get(broker.url("/token"), headers=bearer(session["session_token"]), timeout=10).status_code == 401)
    assert session["access_token"] in live_tokens(auth_server, "alice", client_id), "the provider has not taken it"
    brokers[1].stop()  # the instance that queued it: any other delivers it
    auth_server.clear_faults("revoke")
    assert wait_for(lambda: live_tokens(auth_server, "alice", client_id) == [], 60), "delivered once the provider was back"

    def pending(broker):
        text = requests.get(broker.url("/metrics"), timeout=10).text
        return next(float(l.split()[-1]) for l in text.splitlines() if l.startswith("broker_provider_revocations_pending"))
    assert wait_for(lambda: pending(brokers[0]) == 0, 20)


def test_a_queued_revocation_survives_a_restart_of_the_embedded_store(broker_factory, auth_server, tmp_path):
    state = {"BROKER_STATE_DIR": str(tmp_path / "state")}
    broker, app, client_id, secret = broker_factory(env=state)
    session = app.login("alice")
    auth_server.inject_fault("revoke", status=503, count=None)
    assert app.call("POST", "/revoke").json()["provider_revocation"] == "queued"
    broker.stop()
    auth_server.clear_faults("revoke")
    assert session["access_token"] in live_tokens(auth_server, "alice", client_id)
    restarted, _, _, _ = broker_factory(env=state, client=(client_id, secret))
    assert wait_for(lambda: live_tokens(auth_server, "alice", client_id) == [], 60), "delivered after the restart"
    assert session["access_token"] not in restarted.log_text and session["session_token"] not in restarted.log_text
