"""OpenID Connect Back-Channel Logout 1.0 with a real OpenID Provider (idpyoidc, support.idpy_op):
the OP ends the user's session and POSTs its signed logout token (`sid`, no `sub`) to the URL
`check-config` printed; the broker's sessions of that provider session end on every instance of
three sharing PostgreSQL (and with the embedded store, also after a restart); a replayed or
tampered logout token is a 400 that ends nothing.
"""

import base64
import json
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
import requests
from cryptojwt.jwk.rsa import new_rsa_key

from support.broker import STATE_KEY, App, BrokerProcess, broker_binary, free_port, wait_for
from support.browser import Browser
from support.postgres import PostgresCluster

EVENT = "http://schemas.openid.net/event/backchannel-logout"


@pytest.fixture(scope="module")
def postgres():
    with PostgresCluster() as cluster:
        yield cluster


def config(op, client_id):
    return f"""server:
  shutdown_grace_seconds: 2
providers:
  op:
    issuer: {op.issuer}
    client_id: {client_id}
    client_secret_env: OP_CLIENT_SECRET
    scopes: [openid, profile, email]
apps:
  web:
    redirect_uris: [http://127.0.0.1/cb]
"""


def register(op, base_url):
    """Registers a broker at `base_url` at the OP, authenticating with its client secret. idpyoidc's
    registration fails (a KeyError on the new client id) unless the client brings keys of its own:
    a public key the broker never uses is given for that alone."""
    return op.register_client([f"{base_url}/callback"], token_endpoint_auth_method="client_secret_basic",
                              jwks={"keys": [new_rsa_key().serialize(private=False)]},
                              backchannel_logout_uri=f"{base_url}/providers/op/backchannel_logout")


def new_user(op, name):
    """A user of this test alone at the session-wide OP: ending its sessions sends logout tokens to
    this test's brokers only (the OP's test API fails on a logout URI nobody listens on any more,
    which the brokers of a finished test would be)."""
    username = f"{name}-{uuid.uuid4().hex[:8]}"
    op.create_user(username, f"{username}-password", name=name.title(), email=f"{username}@example.test", email_verified=True)
    return username


def sign_in(broker, op, username, callback):
    """A session of `username` begun on `broker`, in a browser of its own: a provider session of its own."""
    browser = Browser(allowed_hosts=[op.host, callback.host])
    try:
        return App(broker, browser, provider="op").login(username)
    finally:
        browser.close()


def status(broker, session):
    return requests.get(broker.url("/token"), headers={"Authorization": f"Bearer {session['session_token']}"}, timeout=10).status_code


def claims(token):
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def logout_uri_printed(config_text, env):
    """What `token-broker check-config` tells to register at the provider."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "broker.yaml"
        path.write_text(config_text)
        out = subprocess.run([broker_binary(), "check-config", str(path)], capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 0, out.stderr
    [line] = [line for line in out.stdout.splitlines() if "back-channel logout URI" in line]
    return line.split("back-channel logout URI ", 1)[1]


@pytest.fixture
def three_instances(postgres, idpy_op):
    ports = [free_port() for _ in range(3)]
    public = f"http://127.0.0.1:{ports[1]}"
    env = {"BROKER_STATE_BACKEND": "postgres", "BROKER_POSTGRES_URL": postgres.create_database(),
           "BROKER_POSTGRES_PASSWORD": postgres.password, "BROKER_PUBLIC_URL": public}
    logout_uri = logout_uri_printed(config(idpy_op, "registered-below"), {**env, "OP_CLIENT_SECRET": "x", "BROKER_STATE_KEY": STATE_KEY})
    assert logout_uri == f"{public}/providers/op/backchannel_logout"
    client_id, secret = register(idpy_op, public)
    brokers = [BrokerProcess(config(idpy_op, client_id), env={**env, "OP_CLIENT_SECRET": secret}, port=port) for port in ports]
    yield brokers
    for broker in brokers:
        broker.stop()


def test_the_op_ends_a_sign_in_whose_code_was_not_yet_redeemed(three_instances, idpy_op):
    """The user signs out at the OP between the broker's callback and the app's redemption: the
    logout token (by `sid`) ends the grant behind the code on every instance, and the app's
    redemption, on another instance, is refused."""
    brokers = three_instances
    name = new_user(idpy_op, "carol")
    browser = Browser(allowed_hosts=[idpy_op.host, brokers[1].host])
    try:
        params, verifier = App(brokers[0], browser, provider="op").sign_in(name)
        late = App(brokers[2], browser, provider="op")
        [delivery] = idpy_op.end_sessions(name)["deliveries"]
        assert delivery["status"] == 200, delivery
        refused = late.redeem(params["code"], verifier)
    finally:
        browser.close()
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant", refused.text
    assert "signed out" in refused.json()["error_description"]
    [line] = [line for broker in brokers for line in broker.json_lines() if line.get("audit") == "backchannel_logout"]
    assert line["ended"] == 0 and line["pending_sign_ins_ended"] == 1
    [ended] = [line for broker in brokers for line in broker.json_lines()
               if line.get("audit") == "session.ended" and line.get("held_by") == "handoff_code"]
    assert ended["reason"] == "backchannel_logout"


def test_the_op_ends_a_users_session_on_all_three_instances_and_a_replay_ends_nothing(three_instances, idpy_op):
    brokers = three_instances
    alice_name, bob_name = new_user(idpy_op, "alice"), new_user(idpy_op, "bob")
    alice = sign_in(brokers[0], idpy_op, alice_name, callback=brokers[1])  # begun on the first, called back on the second
    bob = sign_in(brokers[2], idpy_op, bob_name, callback=brokers[1])
    for session in (alice, bob):
        assert [status(broker, session) for broker in brokers] == [200, 200, 200]  # cached on every instance

    ended = idpy_op.end_sessions(alice_name)
    [delivery] = ended["deliveries"]
    assert delivery["status"] == 200 and delivery["url"] == brokers[1].url("/providers/op/backchannel_logout"), delivery
    logout = claims(delivery["logout_token"])
    assert "sid" in logout and "sub" not in logout and EVENT in logout["events"], "the OP names the session by sid alone"
    for broker in brokers:
        assert wait_for(lambda: status(broker, alice) == 401, 2), f"alice's session still answers on {broker.base_url}"
    assert [status(broker, bob) for broker in brokers] == [200, 200, 200]
    [line] = [line for broker in brokers for line in broker.json_lines() if line.get("audit") == "backchannel_logout"]
    assert line["sid"] == logout["sid"] and line["ended"] == 1 and line["provider"] == "op"

    # alice signs in again; the logout token, replayed at every instance, ends nothing.
    again = sign_in(brokers[1], idpy_op, alice_name, callback=brokers[1])
    for broker in brokers:
        replay = requests.post(broker.url("/providers/op/backchannel_logout"), data={"logout_token": delivery["logout_token"]}, timeout=10)
        assert replay.status_code == 400, replay.text
        assert replay.json()["error"] == "invalid_request" and "already received" in replay.json()["error_description"]
        assert replay.headers["Cache-Control"] == "no-store"
        assert delivery["logout_token"] not in replay.text
    assert [status(broker, again) for broker in brokers] == [200, 200, 200]
    assert [status(broker, bob) for broker in brokers] == [200, 200, 200]

    # The OP ends alice's new session too: a new logout token (another jti and sid), accepted.
    second = idpy_op.end_sessions(alice_name)["deliveries"]
    assert [d["status"] for d in second] == [200] and claims(second[0]["logout_token"])["jti"] != logout["jti"]
    for broker in brokers:
        assert wait_for(lambda: status(broker, again) == 401, 2)
    assert [status(broker, bob) for broker in brokers] == [200, 200, 200]
    assert idpy_op.end_sessions(bob_name)["deliveries"][0]["status"] == 200


def test_a_tampered_or_foreign_logout_token_is_400_and_ends_nothing(three_instances, idpy_op):
    brokers = three_instances
    alice = new_user(idpy_op, "alice")
    session = sign_in(brokers[0], idpy_op, alice, callback=brokers[1])
    header, payload, signature = "e30", "e30", "e30"
    forged = {"iss": idpy_op.issuer, "aud": "x", "iat": 1, "jti": "j", "events": {EVENT: {}}, "sub": "alice"}
    body = base64.urlsafe_b64encode(json.dumps(forged).encode()).decode().rstrip("=")
    for token in (f"{header}.{payload}.{signature}", f"eyJhbGciOiJub25lIn0.{body}.", "not a jwt"):
        refused = requests.post(brokers[2].url("/providers/op/backchannel_logout"), data={"logout_token": token}, timeout=10)
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_request", refused.text
        assert token not in refused.text
    missing = requests.post(brokers[2].url("/providers/op/backchannel_logout"), data={}, timeout=10)
    assert missing.status_code == 400
    assert [status(broker, session) for broker in brokers] == [200, 200, 200]
    assert idpy_op.end_sessions(alice)["deliveries"][0]["status"] == 200


def test_with_the_embedded_store_the_logout_ends_the_session_and_its_replay_is_refused_after_a_restart(idpy_op):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    client_id, secret = register(idpy_op, base)
    state = tempfile.TemporaryDirectory(prefix="state-")
    broker = BrokerProcess(config(idpy_op, client_id), env={"OP_CLIENT_SECRET": secret}, port=port, state_dir=state.name)
    try:
        alice = new_user(idpy_op, "alice")
        session = sign_in(broker, idpy_op, alice, callback=broker)
        assert status(broker, session) == 200
        ended = idpy_op.end_sessions(alice)
        [delivery] = [d for d in ended["deliveries"] if d["url"].startswith(base)]
        assert delivery["status"] == 200
        assert status(broker, session) == 401
        metrics = requests.get(broker.url("/metrics"), timeout=10).text
        assert 'broker_audit_events_total{action="backchannel_logout"} 1' in metrics
        broker.stop()
        broker = BrokerProcess(config(idpy_op, client_id), env={"OP_CLIENT_SECRET": secret}, port=port, state_dir=state.name)
        replay = requests.post(broker.url("/providers/op/backchannel_logout"), data={"logout_token": delivery["logout_token"]}, timeout=10)
        assert replay.status_code == 400 and "already received" in replay.json()["error_description"], replay.text
        metrics = requests.get(broker.url("/metrics"), timeout=10).text
        assert 'broker_audit_events_total{action="backchannel_logout.refused"} 1' in metrics
        assert 'action="backchannel_logout"}' not in metrics, "the restarted instance ended nothing"
    finally:
        broker.stop()
        state.cleanup()
