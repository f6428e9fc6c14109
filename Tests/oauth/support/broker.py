"""The real token-broker binary as a child process, and a thin client ("app") that uses it.

The broker is started on a free loopback port with a YAML configuration; its log lines are
collected so tests can read them (and search them for secrets).
"""
from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional
from urllib.parse import urlencode

import requests

from .browser import Browser, query_params
from .pkce import make_pkce

REPO = Path(__file__).resolve().parents[3]
# The key test brokers encrypt their state with.
STATE_KEY = base64.b64encode(os.urandom(32)).decode()


def broker_binary() -> str:
    return os.environ.get("TOKEN_BROKER_BINARY") or str(REPO / ".build" / "debug" / "token-broker")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class BrokerProcess:
    def __init__(self, config: str, env: Optional[dict] = None, args=(), port: Optional[int] = None,
                 state_dir: Optional[str] = None, preexec_fn=None):
        self.port = port or free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.base_url = f"http://{self.host}"
        self.callback_url = f"{self.base_url}/callback"
        self._dir = tempfile.TemporaryDirectory(prefix="broker-")
        self.config_path = Path(self._dir.name) / "broker.yaml"
        self.config_path.write_text(config)
        child_env = {k: v for k, v in os.environ.items() if not k.startswith("BROKER_")}
        child_env["BROKER_LOG_FORMAT"] = "json"
        child_env["BROKER_STATE_DIR"] = state_dir or str(Path(self._dir.name) / "state")
        child_env["BROKER_STATE_KEY"] = STATE_KEY
        # Tests stop brokers with SIGTERM all the time; the ones about the delay set their own.
        child_env["BROKER_SHUTDOWN_DELAY_SECONDS"] = "0"
        child_env.update(env or {})
        # None in `env` removes a variable: the broker's own default applies.
        child_env = {k: v for k, v in child_env.items() if v is not None}
        self.lines: list[str] = []
        self._listening = threading.Event()
        self.process = subprocess.Popen(
            [broker_binary(), "serve", "--config", str(self.config_path), "--listen", self.host, *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=child_env, text=True, preexec_fn=preexec_fn,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._listening.wait(30):
            self.stop(signal.SIGKILL)
            raise RuntimeError("the broker did not start:\n" + "\n".join(self.lines))

    def _read(self):
        for line in self.process.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            if '"msg":"listening"' in line:
                self._listening.set()
        self._listening.set()

    @property
    def log_text(self) -> str:
        return "\n".join(self.lines)

    def json_lines(self) -> list[dict]:
        out = []
        for line in self.lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def stop(self, sig=signal.SIGTERM, timeout: float = 15) -> Optional[int]:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(5)  # every line the process wrote is in `lines` afterwards
        self._dir.cleanup()
        return self.process.returncode

    def url(self, path: str) -> str:
        return self.base_url + path


class App:
    """A thin client of the broker: it holds only what a mobile app would hold."""

    def __init__(self, broker: BrokerProcess, browser: Browser, app: str = "web",
                 redirect_uri: str = "http://127.0.0.1:9/cb", provider: str = "dot"):
        self.broker = broker
        self.browser = browser
        self.app = app
        self.redirect_uri = redirect_uri
        self.provider = provider
        self.session_token: Optional[str] = None
        browser.allow(broker.host)

    def authorize_url(self, state: str = "app-state-1", scope: Optional[str] = None, **extra) -> tuple[str, str]:
        verifier, challenge = make_pkce()
        params = {
            "provider": self.provider, "app": self.app, "redirect_uri": self.redirect_uri,
            "code_challenge": challenge, "code_challenge_method": "S256", "state": state,
        }
        if scope:
            params["scope"] = scope
        params.update(extra)
        return self.broker.url("/authorize?" + urlencode(params)), verifier

    def sign_in(self, username="alice", password=None, consent=True, **authorize) -> tuple[dict, str]:
        """Runs the browser part; returns the app redirect's parameters and the PKCE verifier."""
        url, verifier = self.authorize_url(**authorize)
        password = password or f"{username}-password"
        location = self.browser.authorize(url, username, password, consent=consent)
        assert location.startswith(self.redirect_uri), location
        return query_params(location), verifier

    def redeem(self, code: str, verifier: str, **overrides) -> requests.Response:
        form = {"grant_type": "authorization_code", "code": code, "code_verifier": verifier,
                "redirect_uri": self.redirect_uri, "app": self.app}
        form.update(overrides)
        return requests.post(self.broker.url("/token"), data=form, timeout=30)

    def login(self, username="alice", **authorize) -> dict:
        params, verifier = self.sign_in(username, **authorize)
        assert "code" in params, params
        response = self.redeem(params["code"], verifier)
        assert response.status_code == 200, response.text
        body = response.json()
        self.session_token = body["session_token"]
        return body

    def call(self, method: str, path: str, token: Optional[str] = None, **kwargs) -> requests.Response:
        token = token or self.session_token
        headers = kwargs.pop("headers", {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return requests.request(method, self.broker.url(path), headers=headers, timeout=30, **kwargs)


def provider_config(auth_server, client_id: str, *, provider_id="dot", issuer=None, scopes="[openid, profile, email, read]",
                    extra="") -> str:
    return f"""
  {provider_id}:
    issuer: {issuer or auth_server.issuer}
    client_id: {client_id}
    client_secret_env: DOT_CLIENT_SECRET
    scopes: {scopes}
{extra}"""


def api(base_url: str, allow_private: bool = True, extra: str = "") -> str:
    return f"    api_base_url: {base_url}\n" + ("    api_allow_private_addresses: true\n" if allow_private else "") + extra


# The admin API's token in the tests (conftest's `token_file` holds it).
ADMIN_TOKEN = secrets.token_urlsafe(32)


def broker_config(providers: str, apps: str = "  web:\n    redirect_uris: [http://127.0.0.1/cb]\n") -> str:
    return f"server:\n  shutdown_grace_seconds: 2\nproviders:{providers}\napps:\n{apps}"


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def wait_for(condition, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False
