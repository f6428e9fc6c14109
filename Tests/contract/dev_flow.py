"""The real token-broker in development mode, and the README's walk-through as a thin client.

Used by contract_broker.py (which starts the broker), test_schemathesis.py and
test_schemathesis_flow.py (which sign in), and by schemathesis_hooks.py (which signs in once per
generated test case when a run needs a session it may destroy).
Development mode needs no state key: it has the built-in provider `dev` and the app `demo`,
whose redirect URI is http://127.0.0.1/callback.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import signal
import subprocess
import threading
from pathlib import Path
from typing import Optional
from urllib.parse import parse_qs, urlencode, urlsplit

import requests

REPO = Path(__file__).resolve().parents[2]
PROVIDER = "dev"
APP = "demo"
REDIRECT_URI = "http://127.0.0.1/callback"
TIMEOUT = 15


def broker_binary() -> str:
    return os.environ.get("TOKEN_BROKER_BINARY") or str(REPO / ".build" / "debug" / "token-broker")


class DevBroker:
    """`token-broker serve --dev` on a loopback port the broker picks itself (port 0)."""

    def __init__(self, env: Optional[dict] = None) -> None:
        binary = broker_binary()
        if not os.access(binary, os.X_OK):
            raise FileNotFoundError(f"no token-broker binary at {binary} (build it, or set TOKEN_BROKER_BINARY)")
        child_env = {k: v for k, v in os.environ.items() if not k.startswith("BROKER_")}
        child_env["BROKER_LOG_FORMAT"] = "json"
        child_env.update(env or {})
        self.lines: list[str] = []
        self.base_url: Optional[str] = None
        self._listening = threading.Event()
        self.process = subprocess.Popen(
            [binary, "serve", "--dev", "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=child_env, text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._listening.wait(30) or self.base_url is None:
            self.stop(signal.SIGKILL)
            raise RuntimeError("the broker did not start:\n" + "\n".join(self.lines[-50:]))

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            if self.base_url is None and '"msg":"listening"' in line:
                try:
                    self.base_url = "http://" + json.loads(line)["address"]
                except (ValueError, KeyError):
                    pass
                self._listening.set()
        self._listening.set()

    def json_lines(self, start: int = 0) -> list[dict]:
        out = []
        for line in self.lines[start:]:
            try:
                out.append(json.loads(line))
            except ValueError:
                out.append({"level": "unparsed", "msg": line})
        return out

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> Optional[int]:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(5)
        return self.process.returncode


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)[:64]
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def query_of(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def authorize_query(challenge: str, state: str = "xyz", **extra: str) -> str:
    params = {"provider": PROVIDER, "app": APP, "redirect_uri": REDIRECT_URI, "code_challenge": challenge,
              "code_challenge_method": "S256", "state": state}
    params.update(extra)
    return urlencode(params)


def start_login(base_url: str, http: requests.Session, state: str = "xyz") -> tuple[str, str]:
    """GET /authorize: answers the dev provider's sign-in URL and the PKCE verifier."""
    verifier, challenge = pkce()
    answer = http.get(f"{base_url}/authorize?{authorize_query(challenge, state)}", allow_redirects=False,
                      timeout=TIMEOUT)
    if answer.status_code != 302:
        raise RuntimeError(f"GET /authorize answered {answer.status_code}: {answer.text}")
    return answer.headers["Location"], verifier


def sign_in_at_provider(sign_in_url: str, http: requests.Session, user: str = "alice") -> str:
    """Posts the dev provider's sign-in form; answers the broker /callback URL it redirects to."""
    answer = http.post(sign_in_url, data={"user": user, "decision": "allow"}, allow_redirects=False,
                       timeout=TIMEOUT)
    if answer.status_code != 302:
        raise RuntimeError(f"the dev sign-in answered {answer.status_code}: {answer.text}")
    return answer.headers["Location"]


def token_form(code: str, verifier: str) -> dict[str, str]:
    return {"grant_type": "authorization_code", "code": code, "code_verifier": verifier,
            "redirect_uri": REDIRECT_URI, "app": APP}


def sign_in(base_url: str, user: str = "alice") -> dict:
    """The whole walk-through: authorize, sign in, callback, redeem. Answers the POST /token body."""
    with requests.Session() as http:
        sign_in_url, verifier = start_login(base_url, http)
        callback = sign_in_at_provider(sign_in_url, http, user)
        back = http.get(callback, allow_redirects=False, timeout=TIMEOUT)
        if back.status_code != 302 or not back.headers["Location"].startswith(REDIRECT_URI + "?"):
            raise RuntimeError(f"GET /callback answered {back.status_code}: {back.headers.get('Location')}")
        code = query_of(back.headers["Location"])["code"]
        tokens = http.post(f"{base_url}/token", data=token_form(code, verifier), timeout=TIMEOUT)
        if tokens.status_code != 200:
            raise RuntimeError(f"POST /token answered {tokens.status_code}: {tokens.text}")
        return tokens.json()
