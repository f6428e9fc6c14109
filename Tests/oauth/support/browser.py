"""A scripted user agent for authorization-code flows (requests.Session, no JavaScript).

    browser = Browser(allowed_hosts=[auth_server.host, broker_host])
    location = browser.authorize(start_url, "alice", "alice-password", consent=True)
    # location: the first redirect that leaves the allowed hosts, NOT fetched,
    # e.g. "myapp://cb?code=...&state=..." or "http://127.0.0.1:9/cb?error=access_denied"

The browser follows redirects itself, only to hosts on its allowlist (plus the host of the URL it
was asked to open), so it never contacts the app's redirect URI. Cookies persist across calls,
like a real browser: a second authorize() for the same user skips the login form.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Iterable, Optional
from urllib.parse import parse_qs, urljoin, urlsplit

import requests

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
DEFAULT_PORTS = {"http": 80, "https": 443}


class BrowserError(AssertionError):
    """The flow did not end in a redirect out of the allowed hosts. `response` is the last
    response received (may be None), `history` the hops taken."""

    def __init__(self, message: str, response: Optional[requests.Response] = None, history=()):
        self.response = response
        self.history = list(history)
        detail = ""
        if response is not None:
            detail = f"\nlast response: {response.status_code} {response.url}\n{response.text[:2000]}"
        hops = "\n".join(f"  {m} {u} -> {s}" for m, u, s in self.history)
        super().__init__(f"{message}{detail}\nhops:\n{hops}")


def host_port(url_or_host: str) -> str:
    """'http://127.0.0.1:8000/x' or '127.0.0.1:8000' -> '127.0.0.1:8000' (default port filled in)."""
    if "://" not in url_or_host:
        url_or_host = "http://" + url_or_host
    parts = urlsplit(url_or_host)
    host = (parts.hostname or "").lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    return f"{host}:{port}"


def query_params(url: str) -> dict:
    """The query (or, if none, the fragment) of `url` as a flat dict of first values."""
    parts = urlsplit(url)
    qs = parts.query or parts.fragment
    return {k: v[0] for k, v in parse_qs(qs, keep_blank_values=True).items()}


@dataclass
class Form:
    attrs: dict
    fields: list = field(default_factory=list)  # (name, type, value)

    @property
    def id(self) -> str:
        return self.attrs.get("id") or ""

    @property
    def action(self) -> str:
        return self.attrs.get("action") or ""

    @property
    def method(self) -> str:
        return (self.attrs.get("method") or "get").upper()

    def has_field(self, name: str = None, type_: str = None) -> bool:
        return any((name is None or n == name) and (type_ is None or t == type_) for n, t, _ in self.fields)

    def values(self, submit: Optional[str] = None) -> dict:
        """Successful controls: every named non-button field, plus the `submit` button if given."""
        data = {}
        for name, type_, value in self.fields:
            if not name:
                continue
            if type_ in ("submit", "button", "image", "reset"):
                if name == submit:
                    data[name] = value
                continue
            if type_ in ("checkbox", "radio"):
                continue  # none checked by default in our forms
            data.setdefault(name, value)
        return data


class _FormParser(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.forms: list[Form] = []
        self._current: Optional[Form] = None
        self._textarea: Optional[list] = None

    def handle_starttag(self, tag, attrs):
        a = {k: (v if v is not None else "") for k, v in attrs}
        if tag == "form":
            self._current = Form(a)
            self.forms.append(self._current)
        elif self._current is None:
            return
        elif tag == "input":
            self._current.fields.append([a.get("name"), (a.get("type") or "text").lower(), a.get("value", "")])
        elif tag == "button":
            self._current.fields.append([a.get("name"), (a.get("type") or "submit").lower(), a.get("value", "")])
        elif tag == "textarea":
            self._textarea = [a.get("name"), "textarea", ""]
            self._current.fields.append(self._textarea)

    def handle_data(self, data):
        if self._textarea is not None:
            self._textarea[2] += data

    def handle_endtag(self, tag):
        if tag == "form":
            self._current = None
        elif tag == "textarea":
            self._textarea = None


def parse_forms(html: str) -> list[Form]:
    p = _FormParser()
    p.feed(html)
    p.close()
    return p.forms


class Browser:
    def __init__(self, allowed_hosts: Iterable[str] = (), *, timeout: float = 15.0, max_steps: int = 25):
        self.session = requests.Session()
        self.session.headers.update({"User-Agent": "oauth-test-browser/1.0", "Accept": BROWSER_ACCEPT})
        self.allowed_hosts = {host_port(h) for h in allowed_hosts}
        self.timeout = timeout
        self.max_steps = max_steps
        self.history: list[tuple[str, str, int]] = []  # (method, url, status) of the last call
        self.last_response: Optional[requests.Response] = None

    # -------------------------------------------------------------- allowlist
    def allow(self, *hosts: str) -> "Browser":
        """Add hosts ("127.0.0.1:8080" or a URL) whose redirects the browser follows."""
        self.allowed_hosts.update(host_port(h) for h in hosts)
        return self

    def is_allowed(self, url: str, extra: Iterable[str] = ()) -> bool:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            return False
        return host_port(url) in self.allowed_hosts or host_port(url) in set(extra)

    def clear_cookies(self) -> None:
        """Forget every login (a fresh browser profile)."""
        self.session.cookies.clear()

    # -------------------------------------------------------------- single hop
    def get_location(self, url: str, *, expect_redirect: bool = True, **kwargs) -> Optional[str]:
        """GET `url` without following redirects; return its absolute Location.

        With expect_redirect (default) a non-3xx answer raises BrowserError; otherwise None is
        returned for it. The response is kept in `last_response`.
        """
        kwargs.setdefault("timeout", self.timeout)
        resp = self.session.get(url, allow_redirects=False, **kwargs)
        self.last_response = resp
        self.history = [("GET", url, resp.status_code)]
        loc = resp.headers.get("Location")
        if resp.is_redirect and loc:
            return urljoin(resp.url, loc)
        if expect_redirect:
            raise BrowserError(f"expected a redirect from {url}", resp, self.history)
        return None

    # -------------------------------------------------------------- full flow
    def authorize(
        self,
        url: str,
        username: Optional[str] = None,
        password: Optional[str] = None,
        consent: bool = True,
        *,
        headers: Optional[dict] = None,
    ) -> str:
        """Open `url` and play the user until a redirect leaves the allowed hosts; return that
        Location without fetching it.

        Redirects are followed only to allowed hosts (and the host of `url`). A login form
        (one with a password field) is filled with username/password; a consent form
        (DOT's #authorizationForm) is submitted with "allow" when `consent` else with "deny"
        (which the server answers with error=access_denied). Raises BrowserError on anything
        else: an error page, a rejected login, a redirect loop.
        """
        start_host = host_port(url)
        method, target, data = "GET", url, None
        logins = consents = 0
        self.history = []
        resp = None
        for _ in range(self.max_steps):
            if not self.is_allowed(target, extra=[start_host]):
                raise BrowserError(f"refusing to fetch {target}: not an allowed host", resp, self.history)
            resp = self.session.request(
                method, target, data=data, headers=headers, allow_redirects=False, timeout=self.timeout
            )
            self.last_response = resp
            self.history.append((method, target, resp.status_code))
            location = resp.headers.get("Location")
            if resp.is_redirect and location:
                location = urljoin(resp.url, location)
                if not self.is_allowed(location, extra=[start_host]):
                    return location
                method, target, data = "GET", location, None
                continue
            if resp.status_code != 200 or "html" not in resp.headers.get("Content-Type", ""):
                raise BrowserError(f"unexpected answer from {target}", resp, self.history)
            forms = parse_forms(resp.text)
            login = next((f for f in forms if f.has_field(type_="password")), None)
            consent_form = next(
                (f for f in forms if f.id == "authorizationForm" or f.has_field("allow")), None
            )
            if login is not None:
                if username is None or password is None:
                    raise BrowserError("login form shown but no credentials given", resp, self.history)
                if logins:
                    raise BrowserError(f"login as {username!r} rejected", resp, self.history)
                logins += 1
                values = login.values()
                user_field = next(
                    (n for n, t, _ in login.fields if n and t in ("text", "email") and n != "next"), "username"
                )
                pass_field = next(n for n, t, _ in login.fields if t == "password")
                values[user_field] = username
                values[pass_field] = password
                method, target, data = login.method, urljoin(resp.url, login.action or resp.url), values
                continue
            if consent_form is not None:
                if consents:
                    raise BrowserError("consent form shown again after submitting it", resp, self.history)
                consents += 1
                values = consent_form.values(submit="allow" if consent else "deny")
                action = urljoin(resp.url, consent_form.action or resp.url)
                method, target, data = consent_form.method, action, values
                continue
            raise BrowserError(f"page at {target} has neither a login nor a consent form", resp, self.history)
        raise BrowserError(f"more than {self.max_steps} steps", resp, self.history)

    def close(self) -> None:
        self.session.close()
