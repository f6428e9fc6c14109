"""The device flow (RFC 8628) from both ends: `DeviceClient` is the command-line tool that asks
for codes and polls; `DevicePerson` is the person who types the code at /device in a scripted
browser (requests, no JavaScript), chooses, and signs in at the authorization server."""

from __future__ import annotations

import time
from typing import Optional
from urllib.parse import urljoin, urlparse

import requests

from support.browser import Browser, parse_forms

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code"


class DeviceClient:
    def __init__(self, broker, app: str = "tv", provider: str = "dot"):
        self.broker = broker
        self.app = app
        self.provider = provider
        self.codes: dict = {}

    def request_codes(self, **extra) -> dict:
        answer = requests.post(self.broker.url("/device/authorize"),
                               data={"app": self.app, "provider": self.provider, **extra}, timeout=10)
        assert answer.status_code == 200, answer.text
        self.codes = answer.json()
        return self.codes

    def poll(self, device_code: Optional[str] = None) -> requests.Response:
        return requests.post(self.broker.url("/token"), data={
            "grant_type": GRANT_TYPE, "device_code": device_code or self.codes["device_code"], "app": self.app,
        }, timeout=30)

    def poll_until_done(self, timeout: float = 60) -> requests.Response:
        """Polls as RFC 8628 §3.5 says: every `interval` seconds, 5 more after a slow_down."""
        interval = self.codes["interval"]
        deadline = time.time() + timeout
        while time.time() < deadline:
            time.sleep(interval)
            answer = self.poll()
            error = answer.json().get("error") if answer.status_code == 400 else None
            if error == "authorization_pending":
                continue
            if error == "slow_down":
                interval += 5
                continue
            return answer
        raise AssertionError("the device was not signed in in time")


class DevicePerson:
    """A person at the broker's /device pages, in a browser of their own."""

    def __init__(self, broker, auth_server):
        self.broker = broker
        self.browser = Browser(allowed_hosts=[auth_server.host])
        self.session = self.browser.session

    def enter(self, typed: str) -> requests.Response:
        """Opens /device, types `typed` into its form and submits it: the answer page (for a code found,
        the question the answer leads to)."""
        page = self.session.get(self.broker.url("/device"), timeout=10)
        assert page.status_code == 200, page.text
        form = parse_forms(page.text)[0]
        values = form.values()
        values["user_code"] = typed
        answer = self.session.post(urljoin(page.url, form.action), data=values, allow_redirects=False, timeout=10)
        if answer.status_code != 303:
            return answer
        # A code found: its question has an address of its own, which a reload asks again.
        location = answer.headers["Location"]
        assert urlparse(location).path == "/device/decision" and "user_code=" in urlparse(location).query, location
        return self.session.get(location, allow_redirects=False, timeout=10)

    def choose(self, confirm_page: requests.Response, decision: str) -> requests.Response:
        form = next(f for f in parse_forms(confirm_page.text) if f.action == "/device/decision")
        buttons = [value for name, type_, value in form.fields if name == "decision" and type_ == "submit"]
        assert decision in buttons, buttons
        # The button pressed is the one successful submit control (HTML §4.10.21.4).
        return self.session.post(self.broker.url(form.action), data={**form.values(), "decision": decision},
                                 allow_redirects=False, timeout=10)

    def sign_in(self, typed: str, username: str = "alice", consent: bool = True) -> requests.Response:
        """Enters the code, continues, signs in (and consents, or not) at the server: the broker's
        page after the sign-in (the account to confirm, or what went wrong)."""
        confirm = self.enter(typed)
        assert confirm.status_code == 200 and "Sign in a device?" in confirm.text, confirm.text
        onward = self.choose(confirm, "approve")
        assert onward.status_code == 303, onward.text
        callback = self.browser.authorize(onward.headers["Location"], username, f"{username}-password", consent=consent)
        assert "/callback?" in callback, callback  # the public URL's instance, maybe not this one
        return self.session.get(callback, timeout=30)

    def confirm_account(self, account_page: requests.Response, decision: str = "approve") -> requests.Response:
        """Allows (or refuses) the account the page shows: the broker's closing page (the
        confirmation's own address, which the answer redirects to)."""
        assert account_page.status_code == 200 and "Is this the right account?" in account_page.text, account_page.text
        form = next(f for f in parse_forms(account_page.text) if f.action == "/device/confirm")
        return self.session.post(urljoin(account_page.url, form.action), data={**form.values(), "decision": decision}, timeout=10)

    def approve(self, typed: str, username: str = "alice") -> requests.Response:
        """The whole sign-in of a device: the broker's closing page."""
        return self.confirm_account(self.sign_in(typed, username))

    def close(self):
        self.browser.close()
