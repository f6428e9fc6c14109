"""Start/stop the loopback test authorization server (Tests/oauth/authserver) and drive it.

    server = AuthServer()            # or the session-scoped `auth_server` pytest fixture
    server.start()
    server.create_user("alice", "alice-password")
    client_id, secret = server.register_client(redirect_uris=["http://127.0.0.1:9/cb"])
    ...
    server.stop()
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

import requests

from .issuer import LoopbackIssuer

AUTHSERVER_DIR = Path(__file__).resolve().parent.parent / "authserver"


class AuthServerError(RuntimeError):
    pass


@dataclass(frozen=True)
class OAuthUser:
    username: str
    password: str
    sub: str
    email: str
    name: str


class AuthServer(LoopbackIssuer):
    """A django-oauth-toolkit server on 127.0.0.1:<free port>, in its own process."""

    error = AuthServerError
    label = "authserver"

    def __init__(
        self,
        *,
        access_token_lifetime: int = 3600,
        approval_prompt: str = "force",
        redirect_schemes: Iterable[str] = ("http", "https"),
        python: str = sys.executable,
        startup_timeout: float = 30.0,
        keep_data: bool = False,
    ):
        self.host_ip = "127.0.0.1"
        self.port: Optional[int] = None
        self.initial_access_token_lifetime = int(access_token_lifetime)
        self.approval_prompt = approval_prompt
        self.redirect_schemes = tuple(redirect_schemes)
        self.python = python
        self.startup_timeout = startup_timeout
        self.keep_data = keep_data
        self.users: dict[str, OAuthUser] = {}
        self.tmpdir: Optional[Path] = None
        self.log_path: Optional[Path] = None
        self._proc: Optional[subprocess.Popen] = None
        self._log_file = None
        self._http = requests.Session()
        self._discovery: Optional[dict] = None

    # ----------------------------------------------------------------- addresses
    @property
    def authorization_endpoint(self) -> str:
        return f"{self.issuer}/authorize/"

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/token/"

    @property
    def revocation_endpoint(self) -> str:
        return f"{self.issuer}/revoke_token/"

    @property
    def introspection_endpoint(self) -> str:
        return f"{self.issuer}/introspect/"

    @property
    def userinfo_endpoint(self) -> str:
        return f"{self.issuer}/userinfo/"

    @property
    def jwks_uri(self) -> str:
        return f"{self.issuer}/.well-known/jwks.json"

    @property
    def login_url(self) -> str:
        return f"{self.base_url}/accounts/login/"

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> "AuthServer":
        if self.running:
            return self
        self.tmpdir = Path(tempfile.mkdtemp(prefix="oauth-authserver-"))
        self.log_path = self.tmpdir / "authserver.log"
        self._log_file = open(self.log_path, "ab", buffering=0)
        self._manage("migrate", "--noinput", "-v", "0")
        self._launch_ready()
        return self

    def _launch(self) -> subprocess.Popen:
        return subprocess.Popen(
            [self.python, "manage.py", "runserver", f"{self.host}", "--noreload", "--skip-checks"],
            cwd=AUTHSERVER_DIR,
            env=self._env(),
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def _ready(self, discovery: requests.Response) -> None:
        self._discovery = discovery.json()

    def _env(self) -> dict:
        env = dict(os.environ)
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "settings",
                "PYTHONUNBUFFERED": "1",
                "PYTHONDONTWRITEBYTECODE": "1",
                "AUTHSERVER_DATA_DIR": str(self.tmpdir),
                "AUTHSERVER_RSA_KEY_FILE": str(self.tmpdir / "oidc-rsa-key.pem"),
                "AUTHSERVER_ACCESS_TOKEN_LIFETIME": str(self.initial_access_token_lifetime),
                "AUTHSERVER_APPROVAL_PROMPT": self.approval_prompt,
                "AUTHSERVER_REDIRECT_SCHEMES": ",".join(self.redirect_schemes),
                "AUTHSERVER_PARENT_PID": str(os.getpid()),
            }
        )
        if self.port is not None:
            env["AUTHSERVER_ISSUER"] = f"http://{self.host_ip}:{self.port}/o"
        return env

    def _manage(self, *args: str) -> None:
        res = subprocess.run(
            [self.python, "manage.py", *args],
            cwd=AUTHSERVER_DIR,
            env=self._env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=120,
        )
        self._log_file.write(res.stdout)
        if res.returncode != 0:
            raise AuthServerError(f"manage.py {' '.join(args)} failed:\n{res.stdout.decode(errors='replace')}")

    # ----------------------------------------------------------------- test API
    def _url(self, path: str) -> str:
        return f"{self.base_url}{path}"

    def _post_json(self, path: str, payload: dict) -> dict:
        r = self._http.post(self._url(path), json=payload, timeout=10)
        if r.status_code != 200:
            raise AuthServerError(f"POST {path} -> {r.status_code}: {r.text}")
        return r.json()

    def _get_json(self, path: str) -> dict:
        r = self._http.get(self._url(path), timeout=10)
        if r.status_code != 200:
            raise AuthServerError(f"GET {path} -> {r.status_code}: {r.text}")
        return r.json()

    def discovery(self) -> dict:
        return self._get_json("/o/.well-known/openid-configuration")

    def jwks(self) -> dict:
        return self._get_json("/o/.well-known/jwks.json")

    def create_user(
        self,
        username: str,
        password: str,
        *,
        email: Optional[str] = None,
        name: Optional[str] = None,
        email_verified: bool = True,
        picture: Optional[str] = None,
    ) -> OAuthUser:
        """Create (or update) a user; returns it with its OIDC `sub`."""
        data = self._post_json(
            "/test/users",
            {
                "username": username,
                "password": password,
                "email": email,
                "name": name,
                "email_verified": email_verified,
                "picture": picture,
            },
        )
        user = OAuthUser(username, password, data["sub"], data["email"], data["name"])
        self.users[username] = user
        return user

    def register_client(
        self,
        redirect_uris: Iterable[str],
        client_type: str = "confidential",
        grant_type: str = "authorization-code",
        algorithm: str = "RS256",
        skip_authorization: bool = False,
        *,
        name: Optional[str] = None,
        client_id: Optional[str] = None,
        client_secret: Optional[str] = None,
    ) -> tuple[str, Optional[str]]:
        """Register an OAuth application; returns (client_id, client_secret or None for public).

        algorithm: "RS256" (ID tokens signed with the server's RSA key, in the JWKS), "HS256"
        (signed with the client secret) or "" (no OIDC for this client).
        """
        data = self._post_json(
            "/test/clients",
            {
                "redirect_uris": list(redirect_uris),
                "client_type": client_type,
                "grant_type": grant_type,
                "algorithm": algorithm,
                "skip_authorization": skip_authorization,
                "name": name,
                "client_id": client_id,
                "client_secret": client_secret,
            },
        )
        return data["client_id"], data["client_secret"]

    def stats(self) -> dict:
        """Token-endpoint requests since the last reset, by grant_type: {"refresh_token": 2, ...}."""
        return self._get_json("/test/stats")

    def endpoint_stats(self) -> dict:
        """Requests since the last reset by endpoint: token, revoke, userinfo, authorize,
        introspect, jwks, discovery, metadata, login."""
        return self._get_json("/test/requests")

    def traces(self) -> list[dict]:
        """The trace headers of requests that carried any, since the last reset, in order:
        [{"endpoint": "token", "traceparent": ..., "x_request_id": ...}, ...]."""
        return self._get_json("/test/traces")["traces"]

    def reset_stats(self) -> None:
        self._post_json("/test/reset", {})

    def revoke_user(self, username: str, client_id: Optional[str] = None) -> dict:
        """Kill every access token, refresh token and pending code of `username` (optionally only
        those of one client), as when the user revokes the app at the provider."""
        params = {"username": username}
        if client_id:
            params["client_id"] = client_id
        r = self._http.post(self._url("/test/revoke_user"), data=params, timeout=10)
        if r.status_code != 200:
            raise AuthServerError(f"revoke_user -> {r.status_code}: {r.text}")
        return r.json()

    def user_tokens(self, username: str, client_id: Optional[str] = None) -> dict:
        """Every access and refresh token the server holds for `username` (optionally only those
        of one client), oldest first, in clear: {"access_tokens": [{"token", "expires" (ISO 8601),
        "active", "scope", "client_id", "created"}], "refresh_tokens": [{"token", "revoked" (ISO
        8601 or None), "active", "client_id", "created"}]}. Read-only; lets a test see the refresh
        tokens a client holds (e.g. to prove rotation) without the client revealing them."""
        params = {"username": username}
        if client_id:
            params["client_id"] = client_id
        r = self._http.get(self._url("/test/user_tokens"), params=params, timeout=10)
        if r.status_code != 200:
            raise AuthServerError(f"user_tokens -> {r.status_code}: {r.text}")
        return r.json()

    def token_status(self, token: str) -> dict:
        """{"active": bool, "token_type": "access_token"|"refresh_token"|None, ...}."""
        r = self._http.post(self._url("/test/token_status"), data={"token": token}, timeout=10)
        if r.status_code != 200:
            raise AuthServerError(f"token_status -> {r.status_code}: {r.text}")
        return r.json()

    def token_active(self, token: str) -> bool:
        """True while an access token is unexpired and unrevoked, or a refresh token is usable."""
        return bool(self.token_status(token)["active"])

    def expire_access_token(self, token: str) -> None:
        """Make one access token expire now (the server then rejects it at userinfo)."""
        r = self._http.post(self._url("/test/expire_token"), data={"token": token}, timeout=10)
        if r.status_code != 200:
            raise AuthServerError(f"expire_token -> {r.status_code}: {r.text}")

    @property
    def access_token_lifetime(self) -> int:
        return int(self.config()["access_token_lifetime"])

    def set_access_token_lifetime(self, seconds: int) -> None:
        """Lifetime (expires_in) of access tokens issued from now on."""
        self._post_json("/test/config", {"access_token_lifetime": int(seconds)})

    def inject_fault(
        self,
        endpoint: str,
        *,
        status: Optional[int] = None,
        body: str = "",
        content_type: str = "application/json",
        delay: float = 0.0,
        count: Optional[int] = 1,
    ) -> None:
        """Make the next `count` requests (None: all, until cleared) to `endpoint` ("token",
        "revoke", "userinfo", "jwks", "discovery", "authorize", "introspect", ...) wait `delay`
        seconds and then, if `status` is given, answer `status`/`body` instead of the real view.
        Faulted requests are still counted by stats()."""
        self._post_json(
            "/test/config",
            {
                "faults": {
                    endpoint: {
                        "status": status,
                        "body": body,
                        "content_type": content_type,
                        "delay": delay,
                        "count": count,
                    }
                }
            },
        )

    def clear_faults(self, endpoint: Optional[str] = None) -> None:
        if endpoint is None:
            faults = self.config().get("faults", {})
            if faults:
                self._post_json("/test/config", {"faults": {k: None for k in faults}})
        else:
            self._post_json("/test/config", {"faults": {endpoint: None}})

    def config(self) -> dict:
        return self._get_json("/test/config")

    def reset_config(self) -> None:
        """Back to the start-up access-token lifetime, no faults."""
        self._post_json("/test/config/reset", {})
