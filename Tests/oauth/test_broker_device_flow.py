"""The device flow (RFC 8628) in front of the real authorization server (docs/api.md, "Signing in a
device"): a scripted command-line tool asks for codes and polls while a scripted person types the
code at /device, allows it, and signs in and consents at the server; the tool's session then works
at the server's userinfo. Also: slow_down, refusals (at /device and at the server), expiry, a
replayed device code, wrong and guessed user codes with both rate limits, apps without
`device_flow`, forms from another site, and kill -9 between the approval and the next poll."""

import base64
import os
import re
import signal
import tempfile
import time

import pytest
import requests

from support.broker import BrokerProcess, broker_config, free_port, provider_config
from support.browser import parse_forms
from support.device import DeviceClient, DevicePerson

DEVICE_APP = "  tv:\n    device_flow: true\n"


@pytest.fixture
def start(broker_factory, auth_server):
    """A broker with the device-flow app `tv` (polling every second unless told otherwise)."""
    people = []

    def start(sessions="  device_poll_interval_seconds: 1\n", limits=None):
        extra = DEVICE_APP + "sessions:\n" + sessions
        broker, _, _, _ = broker_factory(config_extra=extra, env=limits)
        person = DevicePerson(broker, auth_server)
        people.append(person)
        return broker, DeviceClient(broker), person

    yield start
    for person in people:
        person.close()


def metric(broker, name: str, **labels) -> float:
    text = requests.get(broker.url("/metrics"), timeout=10).text
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(name + "{" + wanted + "}") or (not labels and line.startswith(name + " ")):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_command_line_tool_signs_in_through_another_browser(start, auth_server):
    broker, cli, person = start()
    codes = cli.request_codes(scope="read")
    assert set(codes) == {"device_code", "user_code", "verification_uri", "verification_uri_complete", "expires_in", "interval"}
    assert re.fullmatch(r"[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}", codes["user_code"])
    assert codes["verification_uri"] == broker.url("/device") and codes["expires_in"] == 600 and codes["interval"] == 1
    assert codes["verification_uri_complete"] == broker.url("/device") + "?user_code=" + codes["user_code"]
    assert cli.poll().json()["error"] == "authorization_pending"

    # Typed in lower case without the dash, as people do.
    confirm = person.enter(codes["user_code"].lower().replace("-", ""))
    assert confirm.status_code == 200
    for shown in ("tv", "dot", "openid", "read", codes["user_code"], "Never enter a code that someone sent you"):
        assert shown in confirm.text
    onward = person.choose(confirm, "approve")
    assert onward.status_code == 303 and onward.headers["Location"].startswith(auth_server.issuer)
    bound = onward.headers["Set-Cookie"]
    assert re.match(r"tb_device_login=[A-Za-z0-9_-]{43};", bound) and "HttpOnly" in bound and "SameSite=Lax" in bound, bound
    callback = person.browser.authorize(onward.headers["Location"], "alice", "alice-password")
    account = person.session.get(callback, timeout=30)
    # The account is shown before the device gets anything.
    assert account.status_code == 200 and "alice@example.test" in account.text, account.text
    assert cli.poll().json()["error"] == "authorization_pending"
    closing = person.confirm_account(account)
    assert closing.status_code == 200 and "Device signed in" in closing.text

    answer = cli.poll_until_done()
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["session_token"].startswith("tbs_") and body["provider"] == "dot" and "read" in body["scope"].split()
    userinfo = requests.get(auth_server.userinfo_endpoint, headers={"Authorization": f"Bearer {body['access_token']}"}, timeout=10)
    assert userinfo.status_code == 200 and userinfo.json()["sub"]
    current = requests.get(broker.url("/token"), headers={"Authorization": f"Bearer {body['session_token']}"}, timeout=10)
    assert current.status_code == 200 and current.json()["access_token"] == body["access_token"]

    replay = cli.poll()
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert metric(broker, "broker_device_codes_total", outcome="approved") == 1
    assert metric(broker, "broker_device_codes_total", outcome="collected") == 1
    log = broker.log_text
    for secret in (codes["device_code"], body["session_token"], body["access_token"], codes["user_code"]):
        assert secret not in log


def test_polling_faster_than_the_interval_gets_slow_down(start):
    broker, cli, _ = start(sessions="  device_poll_interval_seconds: 5\n")
    cli.request_codes()
    assert cli.poll().json()["error"] == "authorization_pending"
    first, second = cli.poll(), cli.poll()
    assert first.status_code == 400 and first.json()["error"] == "slow_down" and "10 seconds" in first.json()["error_description"]
    assert second.json()["error"] == "slow_down" and "15 seconds" in second.json()["error_description"]


def test_refusing_at_the_device_page_denies_and_spends_the_code(start):
    broker, cli, person = start()
    codes = cli.request_codes()
    confirm = person.enter(codes["user_code"])
    refused = person.choose(confirm, "deny")
    # Answered with the address of a page (POST, then GET): a reload shows the page again and
    # sends the spent code nowhere, so it is never counted as a wrong one.
    assert refused.status_code == 303 and refused.headers["Location"] == broker.url("/device/refused")
    for _ in range(4):
        page = person.session.get(refused.headers["Location"], timeout=10)
        assert page.status_code == 200 and "Device not signed in" in page.text
    # Back to the question (its own address): it says the code is no longer waiting, and counts
    # nothing against the person either.
    for _ in range(4):
        back = person.session.get(confirm.url, allow_redirects=False, timeout=10)
        assert back.status_code == 400 and "unknown, expired or already used" in back.text, back.text
    assert metric(broker, "broker_device_user_code_entries_total", outcome="unknown") == 0
    assert cli.poll().json()["error"] == "access_denied"
    again = person.enter(codes["user_code"])
    assert again.status_code == 400 and "unknown, expired or already used" in again.text
    assert metric(broker, "broker_device_codes_total", outcome="denied") == 1
    # The form's address, opened again from the history, leads back to the code's page.
    reopened = person.session.get(broker.url("/device/decision"), allow_redirects=False, timeout=10)
    assert reopened.status_code == 302 and reopened.headers["Location"] == broker.url("/device")


def test_the_question_of_a_code_is_for_the_browser_that_typed_it(start):
    """The question's address names the code and is bound to the browser that typed it: in
    another browser, or loaded by another site's page (without the cookie), it is the code's page,
    and nothing is looked up or counted."""
    broker, cli, person = start()
    codes = cli.request_codes()
    confirm = person.enter(codes["user_code"])
    assert confirm.status_code == 200 and "Sign in a device?" in confirm.text
    elsewhere = requests.get(confirm.url, allow_redirects=False, timeout=10)
    assert elsewhere.status_code == 302 and elsewhere.headers["Location"] == broker.url("/device")
    # Another code in the same browser's address, or the address without its tag: the code's page.
    for params in ({"user_code": "BCDF-GHJK"}, {"device": "AAAA", "user_code": codes["user_code"], "check": "x"}):
        other = person.session.get(broker.url("/device/decision"), params=params, allow_redirects=False, timeout=10)
        assert other.status_code == 302 and other.headers["Location"] == broker.url("/device")
    assert metric(broker, "broker_device_user_code_entries_total", outcome="unknown") == 0
    assert metric(broker, "broker_device_user_code_entries_total", outcome="found") == 1
    # Asked again in the browser that typed it, it still waits.
    assert "Sign in a device?" in person.session.get(confirm.url, timeout=10).text
    assert cli.poll().json()["error"] == "authorization_pending"


def test_signing_in_devices_one_after_another_is_not_stopped_at_the_last_step(start):
    """Each device takes two code entries (the code, the decision); the account's confirmation
    that follows its sign-in is counted with sign-ins, not with them: with four entries a
    minute, two devices sign in, and the third is refused at its code, as a page."""
    broker, cli, person = start(limits={"BROKER_DEVICE_CODE_ENTRIES_PER_MINUTE": "4"})
    for _ in range(2):
        codes = cli.request_codes()
        account = person.sign_in(codes["user_code"])
        assert "alice@example.test" in account.text, account.text
        closing = person.confirm_account(account)
        assert closing.status_code == 200 and "Device signed in" in closing.text, closing.text
        assert cli.poll_until_done().status_code == 200
    limited = person.enter(cli.request_codes()["user_code"])
    assert limited.status_code == 429 and "text/html" in limited.headers["Content-Type"]


def test_two_devices_signed_in_at_once_in_one_browser_both_finish(start):
    """A person signs in two devices in two tabs of one browser: each Continue binds its own
    sign-in, and the first to have pressed it finishes as well as the second."""
    broker, cli, person = start(limits={"BROKER_DEVICE_CODE_ENTRIES_PER_MINUTE": "100"})
    other_cli = DeviceClient(broker)
    onward = [person.choose(person.enter(client.request_codes()["user_code"]), "approve") for client in (cli, other_cli)]
    assert all(answer.status_code == 303 for answer in onward), [answer.text for answer in onward]
    for client, answer in zip((cli, other_cli), onward):
        callback = person.browser.authorize(answer.headers["Location"], "alice", "alice-password")
        account = person.session.get(callback, timeout=30)
        assert account.status_code == 200 and "Is this the right account?" in account.text, account.text
        assert "Device signed in" in person.confirm_account(account).text
        assert client.poll_until_done().status_code == 200
    # A batch of sign-ins keeps one cookie, bound to the last 8.
    for _ in range(10):
        person.choose(person.enter(DeviceClient(broker).request_codes()["user_code"]), "approve")
    cookies = [cookie for cookie in person.session.cookies if cookie.name.startswith("tb_device_login")]
    assert len(cookies) == 1 and len(cookies[0].value.split(".")) == 8, [(c.name, c.value) for c in cookies]


@pytest.mark.parametrize("written", ["http://127.0.0.1:9/broker", "http://127.0.0.1:9/broker/"])
def test_the_pages_forms_and_links_start_at_the_public_urls_path(broker_factory, written):
    """Behind a proxy that serves the broker under a path (`public_url` http://host/broker, the
    proxy taking `/broker` off; written with a trailing slash or not), the pages' forms and links
    start with that path, as the redirects and the codes' addresses do: a browser's next request
    reaches the broker again."""
    public = "http://127.0.0.1:9/broker"
    broker, _, _, _ = broker_factory(config_extra=DEVICE_APP, env={"BROKER_PUBLIC_URL": written})
    codes = DeviceClient(broker).request_codes()
    assert codes["verification_uri"] == public + "/device"
    person = requests.Session()
    entry = person.get(broker.url("/device"), headers={"Accept": "text/html"}, timeout=10)
    [form] = parse_forms(entry.text)
    assert form.action == "/broker/device", form.action
    typed = person.post(broker.url("/device"), data={**form.values(), "user_code": codes["user_code"]}, allow_redirects=False, timeout=10)
    assert typed.status_code == 303 and typed.headers["Location"].startswith(public + "/device/decision?"), typed.headers
    question = person.get(broker.url(typed.headers["Location"][len(public):]), timeout=10)
    assert [f.action for f in parse_forms(question.text)] == ["/broker/device/decision"], question.text
    lost = person.get(broker.url("/nowhere"), headers={"Accept": "text/html"}, timeout=10)
    assert lost.status_code == 404 and 'href="/broker/"' in lost.text, lost.text


def test_the_login_cookie_lasts_as_long_as_the_device_code(start):
    """The browser that chose to sign in stays the one for as long as the code may be confirmed,
    and an hour more: the cookie is not cut to the login's shorter lifetime, which would have it
    called another browser while its person reads the account's question."""
    broker, cli, person = start(sessions="  device_code_lifetime_seconds: 1800\n  login_lifetime_seconds: 300\n"
                                          "  device_poll_interval_seconds: 1\n")
    codes = cli.request_codes()
    onward = person.choose(person.enter(codes["user_code"]), "approve")
    max_age = int(re.search(r"Max-Age=(\d+)", onward.headers["Set-Cookie"]).group(1))
    assert 1700 + 3600 < max_age <= 1800 + 3600, onward.headers["Set-Cookie"]


def test_a_provider_url_passed_to_another_browser_signs_nothing_in(start, auth_server):
    """Someone starts a device code, continues in their own browser and sends the provider URL to
    someone else: signing in there ends on the broker's error page, nothing is exchanged, and the
    device gets nothing — while the code still works for a person who enters it themselves."""
    broker, cli, attacker = start()
    codes = cli.request_codes()
    onward = attacker.choose(attacker.enter(codes["user_code"]), "approve")
    assert onward.status_code == 303
    victim = DevicePerson(broker, auth_server)
    try:
        callback = victim.browser.authorize(onward.headers["Location"], "bob", "bob-password")
        page = victim.session.get(callback, timeout=30)
        assert page.status_code == 403 and "started in another browser" in page.text, page.text
        assert "bob@example.test" not in page.text
        assert "/device/confirm" not in page.text
        # The victim's browser cannot confirm on the attacker's behalf either (it has no binding).
        forged = victim.session.post(broker.url("/device/confirm"), data={"state": "tbst_x", "device": "x", "decision": "approve"}, timeout=10)
        assert forged.status_code == 403
        time.sleep(codes["interval"])
        assert cli.poll().json()["error"] == "authorization_pending", "the device got nothing"
        assert metric(broker, "broker_rejected_requests_total", route="/callback", reason="device_login_other_browser") == 1
        assert metric(broker, "broker_device_codes_total", outcome="signed_in") == 0
        # The person in front of the device can still sign it in, to their own account.
        closing = attacker.approve(codes["user_code"])
        assert "Device signed in" in closing.text
        answer = cli.poll_until_done()
        assert answer.status_code == 200
        userinfo = requests.get(auth_server.userinfo_endpoint, headers={"Authorization": f"Bearer {answer.json()['access_token']}"}, timeout=10)
        assert userinfo.json()["email"] == "alice@example.test"
    finally:
        victim.close()


def test_refusing_the_account_after_the_sign_in_denies_the_device(start):
    broker, cli, person = start()
    codes = cli.request_codes()
    account = person.sign_in(codes["user_code"], "bob")
    assert "bob@example.test" in account.text
    refused = person.confirm_account(account, "deny")
    assert refused.status_code == 200 and "Device not signed in" in refused.text
    assert cli.poll().json()["error"] == "access_denied"
    # The refusal is final: the page's form, sent again, finds nothing to confirm.
    again = person.confirm_account(account, "approve")
    assert again.status_code == 400
    assert cli.poll().json()["error"] == "access_denied"


def test_refusing_at_the_provider_denies_the_device(start):
    broker, cli, person = start()
    codes = cli.request_codes()
    closing = person.sign_in(codes["user_code"], consent=False)
    assert closing.status_code == 200 and "refused" in closing.text
    assert cli.poll_until_done().json()["error"] == "access_denied"
    # Reloaded, the callback's address says the sign-in has ended, not that it failed; to
    # another browser it is only an address that is used up.
    again = person.session.get(closing.url, headers={"Accept": "text/html"}, timeout=10)
    assert again.status_code == 400 and "already ended" in again.text and "Sign-in failed" not in again.text, again.text
    elsewhere = requests.get(closing.url, headers={"Accept": "text/html"}, timeout=10)
    assert elsewhere.status_code == 400 and "unknown, expired or already used" in elsewhere.text


def test_an_expired_code_is_refused_everywhere(start):
    broker, cli, person = start(sessions="  device_code_lifetime_seconds: 10\n  device_poll_interval_seconds: 1\n")
    codes = cli.request_codes()
    assert codes["expires_in"] == 10
    # Polled as a device polls, until the code's end: pending, then expired.
    assert cli.poll_until_done(timeout=60).json()["error"] == "expired_token"
    late = person.enter(codes["user_code"])
    assert late.status_code == 400 and "unknown, expired or already used" in late.text
    assert metric(broker, "broker_device_codes_total", outcome="expired") == 1


def test_wrong_user_codes_are_counted_and_limited_per_client(start):
    broker, cli, person = start(limits={"BROKER_DEVICE_CODE_ENTRIES_PER_MINUTE": "3"})
    codes = cli.request_codes()
    for guess in ("BCDF-GHJK", "bcdf-ghjl", "BCDFGHJM"):
        wrong = person.enter(guess)
        assert wrong.status_code == 400 and "unknown, expired or already used" in wrong.text
    limited = person.enter(codes["user_code"])
    assert limited.status_code == 429 and int(limited.headers["Retry-After"]) > 0
    assert codes["user_code"] not in limited.text
    assert metric(broker, "broker_device_user_code_entries_total", outcome="unknown") == 3
    assert metric(broker, "broker_device_user_code_entries_total", outcome="rate_limited") == 1


def enter_from(person, address: str, typed: str) -> requests.Response:
    """`person` entering a code as the client at `address` (behind the trusted proxy, 127.0.0.1)."""
    person.session.headers["X-Forwarded-For"] = address
    return person.enter(typed)


def test_wrong_codes_are_bounded_per_client_per_network_and_for_everyone(start):
    broker, cli, person = start(limits={"BROKER_DEVICE_CODE_ENTRIES_PER_MINUTE": "0", "BROKER_DEVICE_CODE_MISSES_PER_MINUTE": "40",
                                        "BROKER_TRUSTED_PROXIES": "127.0.0.1"})
    codes = cli.request_codes()
    # A client backs off first: 40 / 20 = 2 wrong codes a minute.
    for guess in ("BCDF-GHJK", "BCDF-GHJL"):
        assert enter_from(person, "10.0.0.1", guess).status_code == 400
    backed_off = enter_from(person, "10.0.0.1", codes["user_code"])
    assert backed_off.status_code == 429 and "Too many wrong codes" in backed_off.text
    assert f"try again in {backed_off.headers['Retry-After']} second" in backed_off.text
    # Its network next: 40 / 10 = 4 a minute for 10.0.0.0/24.
    for guess in ("BCDF-GHJM", "BCDF-GHJN"):
        assert enter_from(person, "10.0.0.2", guess).status_code == 400
    assert enter_from(person, "10.0.0.3", "BCDF-GHJP").status_code == 429, "the network's share is spent"
    # Someone elsewhere is not held back by them.
    assert "Sign in a device?" in enter_from(person, "192.0.2.7", codes["user_code"]).text
    # Spending everyone's budget takes ten networks: then those networks wait, even with the
    # right code, while a network that sent no wrong code gets in — answered slowly.
    for network in range(1, 10):
        for host in (1, 2):
            for guess in ("BCDF-GHJQ", "BCDF-GHJR"):
                assert enter_from(person, f"10.0.{network}.{host}", guess).status_code == 400
    blocked = enter_from(person, "10.0.5.9", codes["user_code"])
    assert blocked.status_code == 429 and "Too many wrong codes" in blocked.text
    started = time.monotonic()
    slowed = enter_from(person, "198.51.100.9", codes["user_code"])
    assert "Sign in a device?" in slowed.text and time.monotonic() - started >= 3, "in, after 3 s"
    assert metric(broker, "broker_device_user_code_entries_total", outcome="unknown") == 40
    assert metric(broker, "broker_device_user_code_entries_total", outcome="slowed") == 1


def test_six_addresses_guessing_do_not_lock_everyone_out(start):
    """The defaults (60 wrong codes a minute): ten wrong codes from each of six addresses leave a
    person with a valid code, elsewhere, able to sign in."""
    broker, cli, person = start(limits={"BROKER_DEVICE_CODE_ENTRIES_PER_MINUTE": "0", "BROKER_TRUSTED_PROXIES": "127.0.0.1"})
    codes = cli.request_codes()
    statuses = [enter_from(person, f"203.0.113.{host}", "BCDF-GHJK").status_code for host in range(1, 7) for _ in range(10)]
    assert statuses[:4] == [400, 400, 400, 429], "a client backs off after three"
    assert statuses.count(400) == 6 and statuses.count(429) == 54, "their /24 gets six in all"
    assert "Sign in a device?" in enter_from(person, "192.0.2.7", codes["user_code"]).text


def test_polls_as_told_are_never_limited_per_address_and_too_fast_or_guessed_ones_are(start):
    """Devices behind one address poll as often as they are told to: authorization_pending never
    counts against `token_requests_per_minute`; a poll sooner than told (slow_down) and a device
    code refused as invalid_grant do, and once the budget is spent the address's next poll waits
    (429)."""
    broker, cli, _ = start(sessions="  device_poll_interval_seconds: 3\n", limits={"BROKER_TOKEN_REQUESTS_PER_MINUTE": "2"})
    cli.request_codes()
    for _ in range(3):  # more than the budget, each after the interval
        assert cli.poll().json()["error"] == "authorization_pending"
        time.sleep(3)
    assert cli.poll().json()["error"] == "authorization_pending"
    assert cli.poll().json()["error"] == "slow_down"
    guess = cli.poll("guessed-device-code")
    assert guess.status_code == 400 and guess.json()["error"] == "invalid_grant", guess.text
    limited = cli.poll()
    assert limited.status_code == 429 and limited.json()["error"] == "rate_limited", limited.text
    assert metric(broker, "broker_rejected_requests_total", route="/token", reason="rate_limited") == 1


def test_a_device_that_polls_on_after_being_told_to_stop_spends_the_budget(start):
    """RFC 8628 §3.5: access_denied and expired_token end the polling. A device that goes on
    spends its address's `token_requests_per_minute`, and then waits (429)."""
    broker, cli, person = start(limits={"BROKER_TOKEN_REQUESTS_PER_MINUTE": "2"})
    codes = cli.request_codes()
    assert person.choose(person.enter(codes["user_code"]), "deny").status_code == 303
    assert [cli.poll().json()["error"] for _ in range(3)] == ["access_denied", "access_denied", "rate_limited"]


def test_only_device_flow_apps_get_codes(start):
    broker, _, _ = start()
    for data, error in [
        ({"app": "web", "provider": "dot"}, "unauthorized_client"),
        ({"app": "nope", "provider": "dot"}, "invalid_request"),
        ({"app": "tv", "provider": "nope"}, "invalid_request"),
        ({"provider": "dot"}, "invalid_request"),
        ({"app": "tv", "provider": "dot", "scope": "a  b"}, "invalid_request"),
        ({"app": "tv", "client_id": "web", "provider": "dot"}, "invalid_request"),
    ]:
        answer = requests.post(broker.url("/device/authorize"), data=data, timeout=10)
        assert answer.status_code == 400 and answer.json()["error"] == error, (data, answer.text)
    # The standard spelling of the app's id works too.
    assert requests.post(broker.url("/device/authorize"), data={"client_id": "tv", "provider": "dot"}, timeout=10).status_code == 200


def test_a_form_from_another_site_is_refused(start):
    broker, cli, person = start()
    codes = cli.request_codes()
    # No cookie: what a cross-site form post carries under SameSite=Strict.
    forged = requests.post(broker.url("/device/decision"),
                           data={"user_code": codes["user_code"], "decision": "approve", "csrf": "x" * 43}, allow_redirects=False, timeout=10)
    assert forged.status_code == 403
    # The cookie, but not its value in the form.
    person.session.get(broker.url("/device"), timeout=10)
    wrong = person.session.post(broker.url("/device"), data={"user_code": codes["user_code"], "csrf": "A" * 43}, timeout=10)
    assert wrong.status_code == 403
    # A cookie planted by a sibling host (no __Host- prefix under http), repeated as the token.
    planted = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
    forged = requests.post(broker.url("/device/decision"), cookies={"tb_device": planted},
                           data={"user_code": codes["user_code"], "decision": "approve", "csrf": planted}, allow_redirects=False, timeout=10)
    assert forged.status_code == 403
    assert cli.poll().json()["error"] == "authorization_pending", "nothing changed"
    page = person.session.get(broker.url("/device"), timeout=10)
    csp = page.headers["Content-Security-Policy"]
    assert "script-src" not in csp and "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert page.headers["X-Frame-Options"] == "DENY"
    fresh = requests.get(broker.url("/device"), timeout=10).headers["Set-Cookie"]
    assert fresh.startswith("tb_device=") and "HttpOnly" in fresh and "SameSite=Strict" in fresh and "Path=/device" in fresh


def test_kill_9_between_the_approval_and_the_next_poll_loses_nothing(auth_server):
    port = free_port()
    client_id, secret = auth_server.register_client([f"http://127.0.0.1:{port}/callback"])
    config = broker_config(provider_config(auth_server, client_id)) + DEVICE_APP
    state_dir = tempfile.mkdtemp(prefix="broker-device-")
    env = {"DOT_CLIENT_SECRET": secret}
    broker = BrokerProcess(config, env=env, port=port, state_dir=state_dir)
    cli = DeviceClient(broker)
    person = DevicePerson(broker, auth_server)
    try:
        codes = cli.request_codes()
        assert "Device signed in" in person.approve(codes["user_code"]).text
        broker.stop(signal.SIGKILL)
        broker = BrokerProcess(config, env=env, port=port, state_dir=state_dir)
        cli.broker = broker
        answer = cli.poll()
        assert answer.status_code == 200, answer.text
        userinfo = requests.get(auth_server.userinfo_endpoint,
                                headers={"Authorization": f"Bearer {answer.json()['access_token']}"}, timeout=10)
        assert userinfo.status_code == 200
        broker.stop(signal.SIGKILL)
        broker = BrokerProcess(config, env=env, port=port, state_dir=state_dir)
        cli.broker = broker
        assert cli.poll().json()["error"] == "invalid_grant", "collected before the crash, so never again"
        session = requests.get(broker.url("/token"), headers={"Authorization": f"Bearer {answer.json()['session_token']}"}, timeout=10)
        assert session.status_code == 200
    finally:
        person.close()
        broker.stop()
