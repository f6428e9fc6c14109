"""Webhooks: session and refresh-failure events and admin audit events, signed, retried with backoff, never blocking."""
import hashlib
import hmac
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from support.broker import wait_for

SECRET = "webhook-signing-secret-for-tests"


class Receiver:
    def __init__(self, fail_first: int = 0, answer_after: float = 0.0):
        self.events = []
        self.fail_first = fail_first
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.events.append((dict(self.headers), body, time.monotonic()))
                time.sleep(answer_after)  # a receiver that takes its time (it holds the delivery open)
                status = 500 if len(receiver.events) <= receiver.fail_first else 204
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()


def verify(headers, body):
    fields = dict(part.split("=", 1) for part in headers["X-Broker-Signature"].split(","))
    expected = hmac.new(SECRET.encode(), f"{fields['t']}.".encode() + body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(fields["v1"], expected), "bad signature"
    assert abs(int(fields["t"]) - time.time()) < 60


@pytest.fixture
def receiver_factory():
    receivers = []

    def make(**kwargs):
        receiver = Receiver(**kwargs)
        receivers.append(receiver)
        return receiver

    yield make
    for receiver in receivers:
        receiver.stop()


def webhook_config(url, failures=3):
    return f"webhooks:\n  url: {url}\n  secret_env: WEBHOOK_SECRET\n  failures_before_event: {failures}\n"


def test_a_session_ended_by_the_provider_is_reported_signed_and_retried(broker_factory, auth_server, receiver_factory):
    receiver = receiver_factory(fail_first=1)
    broker, app, client_id, _ = broker_factory(config_extra=webhook_config(receiver.url), env={"WEBHOOK_SECRET": SECRET})
    tokens = app.login("alice")
    auth_server.revoke_user("alice", client_id)
    started = time.monotonic()
    assert app.call("POST", "/refresh").status_code == 401
    assert time.monotonic() - started < 1.0, "the client's answer does not wait for the webhook"
    assert wait_for(lambda: len(receiver.events) >= 2, timeout=10), receiver.events
    (first_headers, first_body, first_at), (headers, body, at) = receiver.events[:2]
    assert first_body == body and first_headers["X-Broker-Event-Id"] == headers["X-Broker-Event-Id"]
    assert at - first_at >= 0.9, "retried after a backoff"
    verify(headers, body)
    event = json.loads(body)
    assert event["type"] == "session.ended" and event["reason"] == "invalid_grant"
    assert event["provider"] == "dot" and event["app"] == "web" and event["subject"] == auth_server.users["alice"].sub
    assert tokens["access_token"] not in body.decode() and tokens["session_token"] not in body.decode()
    # Counted once the receiver's answer is read, a moment after the receiver has the event.
    delivered = 'broker_webhook_deliveries_total{outcome="delivered"} 1'
    assert wait_for(lambda: delivered in app.call("GET", "/metrics").text, timeout=10)
    assert 'broker_webhook_deliveries_total{outcome="retried"} 1' in app.call("GET", "/metrics").text


def test_refreshes_that_keep_failing_are_reported_once(broker_factory, auth_server, receiver_factory):
    receiver = receiver_factory()
    broker, app, _, _ = broker_factory(config_extra=webhook_config(receiver.url, failures=2), env={"WEBHOOK_SECRET": SECRET})
    app.login("alice")
    auth_server.inject_fault("token", status=503, body="down", count=3)
    for _ in range(3):
        assert app.call("POST", "/refresh").status_code in (502, 503)
    assert wait_for(lambda: len(receiver.events) >= 1, timeout=10)
    time.sleep(0.5)
    assert len(receiver.events) == 1, "one event per streak of failures"
    headers, body, _ = receiver.events[0]
    verify(headers, body)
    event = json.loads(body)
    assert event["type"] == "refresh.failing" and event["consecutive_failures"] == 2
    assert app.call("GET", "/session").status_code == 200, "the session is kept"


def test_admin_actions_are_reported_as_signed_audit_events_and_refusals_are_logged_only(broker_factory, receiver_factory, tmp_path):
    receiver = receiver_factory()
    token_file = tmp_path / "admin-token"
    token_file.write_text("admin-token-for-the-webhook-test-0123456789")
    broker, app, _, _ = broker_factory(config_extra=webhook_config(receiver.url),
                                       env={"WEBHOOK_SECRET": SECRET, "BROKER_ADMIN_TOKEN_FILE": str(token_file)})
    tokens = app.login("alice")
    subject = app.call("GET", "/session").json()["subject"]
    admin = {"Authorization": f"Bearer {token_file.read_text()}"}
    assert app.call("GET", "/admin/sessions", token="wrong").status_code == 401
    ended = requests.post(broker.url("/admin/subjects/end"), headers=admin, data={"provider": "dot", "subject": subject}, timeout=10)
    assert ended.json()["ended"] == 1
    assert wait_for(lambda: len(receiver.events) >= 1, timeout=10), receiver.events
    time.sleep(0.5)
    events = {}
    for headers, body, _ in receiver.events:
        verify(headers, body)
        event = json.loads(body)
        assert headers["X-Broker-Event"] == event["type"]
        events[event["type"]] = event
        for secret in (tokens["access_token"], tokens["session_token"], token_file.read_text()):
            assert secret not in body.decode()
    assert "admin.refused" not in events, "a refusal is a log line only: anyone can send them"
    assert [line["route"] for line in broker.json_lines() if line.get("audit") == "admin.refused"] == ["/admin/sessions"]
    finished = events["admin.subject_ended"]
    assert finished["provider"] == "dot" and finished["subject"] == subject and finished["ended"] == 1
    assert len(finished["sessions"]) == 1 and finished["provider_revocation"]["succeeded"] == 1


def test_a_burst_of_events_is_delivered_whole_to_a_slow_receiver(broker_factory, receiver_factory, tmp_path):
    """200 events at once to a receiver that holds each delivery 1.5 s: they wait their turn (32
    at a time) rather than be refused by the client's bound, which spent their retries together
    and lost a fifth of them."""
    receiver = receiver_factory(answer_after=1.5)
    token_file = tmp_path / "admin-token"
    token_file.write_text("admin-token-for-the-webhook-burst-0123456789")
    broker, _, _, _ = broker_factory(config_extra=webhook_config(receiver.url),
                                     env={"WEBHOOK_SECRET": SECRET, "BROKER_ADMIN_TOKEN_FILE": str(token_file)})
    admin = {"Authorization": f"Bearer {token_file.read_text()}"}

    def end(index):
        answer = requests.post(broker.url("/admin/subjects/end"), headers=admin, data={"provider": "dot", "subject": f"nobody-{index}"},
                               timeout=30)
        assert answer.status_code == 200 and answer.json()["ended"] == 0, answer.text

    with ThreadPoolExecutor(20) as pool:
        list(pool.map(end, range(200)))

    def delivered():
        return {json.loads(body)["subject"] for _, body, _ in list(receiver.events)}

    assert wait_for(lambda: len(delivered()) == 200, timeout=120), f"{len(delivered())} of 200 delivered"
    for headers, body, _ in list(receiver.events):
        verify(headers, body)
    assert not [line for line in broker.json_lines() if line.get("msg") == "webhook undelivered after retries"]
