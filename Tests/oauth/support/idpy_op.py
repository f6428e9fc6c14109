"""Start/stop a real OpenID Provider, idpyoidc's (Tests/oauth/idpyop/server.py), on loopback, and drive it.

    op = IdpyOP()                    # or the session-scoped `idpy_op` pytest fixture
    op.start()
    op.create_user("alice", "alice-password")
    client_id, _ = op.register_client(["http://127.0.0.1:8080/callback"],
                                      token_endpoint_auth_method="private_key_jwt",
                                      jwks_uri="http://127.0.0.1:8080/jwks.json",
                                      backchannel_logout_uri="http://127.0.0.1:8080/...")
    ... sign in with support.browser.Browser (the OP's login form is a plain username/password form)
    op.end_sessions("alice")         # the OP ends alice's sessions and POSTs the logout tokens
    op.seen()                        # pushed requests, authorization requests, client assertions, logouts
    op.stop()
    IdpyOP(dpop=True, dpop_nonce=True)  # a DPoP provider (RFC 9449), with a DPoP-protected API (op.api_url)

Why idpyoidc (PyPI `idpyoidc`, the Identity Python project's OAuth 2.0 / OpenID Connect library,
the successor of pyoidc and oidcop, used by SATOSA): it is one implementation of every server
side this broker's enterprise features meet, chosen over the others on PyPI for that reason:
- `private_key_jwt` client authentication with the client's keys fetched from its registered
  `jwks_uri` (or taken from an inline `jwks`), each assertion's signature, `aud` and one-time `jti`
  checked at the token, revocation and PAR endpoints;
- Pushed Authorization Requests (RFC 9126) with a one-time `request_uri`;
- OpenID Connect Back-Channel Logout 1.0: a `sid` in the ID token and a signed logout token POSTed
  to each registered `backchannel_logout_uri` when the OP ends a user's session;
- dynamic client registration (the tests register each broker as a real client would be),
  authorization code with PKCE (S256, required), refresh tokens, RFC 7009 revocation, and the
  RFC 9207 `iss` in every authorization response.
django-oauth-toolkit (support.authserver) has none of private_key_jwt, PAR or back-channel logout;
idpyoidc was preferred to canaille (a whole identity-management application built on Authlib)
because it covers all of them in one library whose endpoints a test can reach directly.
What the HTTP front in idpyop/server.py adds around the library, and why, is listed at its top.

The server runs in its own process group on 127.0.0.1:<free port>, its key and database files in
a temporary directory removed by stop(); it exits by itself if the test process dies.

By hand (docs/enterprise.md, "Signing in without a client secret"; docs/dpop.md with --dpop),
from Tests/oauth:
    python -m support.idpy_op --client-for http://127.0.0.1:8080 --provider corp [--require-par] [--dpop]
starts one with the user alice/alice-password and a private_key_jwt client registered for a
broker at that URL (its /callback, its /providers/corp/client-jwks), prints `issuer=...` and
`client_id=...` lines, and runs until interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterable, Optional

import requests

from .issuer import LoopbackIssuer

SERVER_SCRIPT = Path(__file__).resolve().parent.parent / "idpyop" / "server.py"


class IdpyOPError(RuntimeError):
    pass


class IdpyOP(LoopbackIssuer):
    """idpyoidc's OpenID Provider on 127.0.0.1:<free port>, issuer http://127.0.0.1:<port>/o.

    require_par: every client must use PAR (discovery says `require_pushed_authorization_requests`).
    assertion_audience: the `aud` a client assertion must name: "endpoint" (the URL of the
    endpoint it is sent to: idpyoidc's own rule), "issuer", or "both".
    dpop: DPoP (RFC 9449): discovery lists `dpop_signing_alg_values_supported` ["ES256"]; a `DPoP`
    proof at /par, /token, /revoke is checked (400 invalid_dpop_proof / use_dpop_nonce), and a
    good one at /token gets a DPoP-bound token (`token_type` DPoP, `cnf.jkt` in its JWT); a refresh
    of a bound grant needs a proof of the same key; /userinfo takes `Authorization: DPoP`; any
    GET/POST under api_url (e.g. /api/me) is a resource that takes only DPoP-bound tokens.
    dpop_nonce: (implies dpop) every proof must carry the OP's current nonce, sent as `DPoP-Nonce`
    in every answer of those endpoints; rotate_dpop_nonce() changes it.
    dpop_required: (implies dpop) a token request without a DPoP proof is refused.
    """

    error = IdpyOPError
    label = "the OP"

    def __init__(
        self,
        *,
        require_par: bool = False,
        assertion_audience: str = "endpoint",
        access_token_lifetime: int = 3600,
        dpop: bool = False,
        dpop_nonce: bool = False,
        dpop_required: bool = False,
        python: str = sys.executable,
        startup_timeout: float = 30.0,
        keep_data: bool = False,
    ):
        if assertion_audience not in ("endpoint", "issuer", "both"):
            raise ValueError(assertion_audience)
        self.host_ip = "127.0.0.1"
        self.port: Optional[int] = None
        self.require_par = require_par
        self.assertion_audience = assertion_audience
        self.access_token_lifetime = int(access_token_lifetime)
        self.dpop = bool(dpop or dpop_nonce or dpop_required)
        self.dpop_nonce = bool(dpop_nonce)
        self.dpop_required = bool(dpop_required)
        self.python = python
        self.startup_timeout = startup_timeout
        self.keep_data = keep_data
        self.tmpdir: Optional[Path] = None
        self.log_path: Optional[Path] = None
        self._proc: Optional[subprocess.Popen] = None
        self._log_file = None
        self._http = requests.Session()

    # ----------------------------------------------------------------- addresses
    @property
    def authorization_endpoint(self) -> str:
        return f"{self.issuer}/authorization"

    @property
    def pushed_authorization_request_endpoint(self) -> str:
        return f"{self.issuer}/par"

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/token"

    @property
    def revocation_endpoint(self) -> str:
        return f"{self.issuer}/revoke"

    @property
    def userinfo_endpoint(self) -> str:
        return f"{self.issuer}/userinfo"

    @property
    def end_session_endpoint(self) -> str:
        return f"{self.issuer}/session"

    @property
    def jwks_uri(self) -> str:
        return f"{self.issuer}/jwks"

    @property
    def api_url(self) -> str:
        """The DPoP-protected API (with `dpop`): any GET or POST under it, e.g. f"{op.api_url}/me"."""
        return f"{self.issuer}/api"

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> "IdpyOP":
        if self.running:
            return self
        self.tmpdir = Path(tempfile.mkdtemp(prefix="idpy-op-"))
        self.log_path = self.tmpdir / "op.log"
        self._log_file = open(self.log_path, "ab", buffering=0)
        for name in ("passwd.json", "users.json"):
            (self.tmpdir / name).write_text("{}")
        self._launch_ready()
        return self

    def _launch(self) -> subprocess.Popen:
        config = self.tmpdir / "op.json"
        config.write_text(
            json.dumps(
                {
                    "issuer": self.issuer,
                    "port": self.port,
                    "data_dir": str(self.tmpdir),
                    "parent_pid": os.getpid(),
                    "require_par": self.require_par,
                    "assertion_audience": self.assertion_audience,
                    "access_token_lifetime": self.access_token_lifetime,
                    "dpop": self.dpop,
                    "dpop_nonce": self.dpop_nonce,
                    "dpop_required": self.dpop_required,
                }
            )
        )
        return subprocess.Popen(
            [self.python, str(SERVER_SCRIPT), str(config)],
            cwd=self.tmpdir,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"},
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    # ----------------------------------------------------------------- test API
    def _call(self, method: str, path: str, expect=(200,), **kwargs) -> dict:
        r = self._http.request(method, f"{self.issuer}{path}", timeout=15, **kwargs)
        if r.status_code not in expect:
            raise IdpyOPError(f"{method} {path} -> {r.status_code}: {r.text}")
        return r.json()

    def discovery(self) -> dict:
        return self._call("GET", "/.well-known/openid-configuration")

    def create_user(self, username: str, password: str, *, name: Optional[str] = None,
                    email: Optional[str] = None, email_verified: bool = True) -> dict:
        """Adds a user who can sign in with the login form; returns its claims. Its `sub` is
        idpyoidc's public subject identifier (a hash of the username): read it from userinfo or
        an ID token."""
        return self._call("POST", "/test/users", json={
            "username": username, "password": password, "name": name, "email": email,
            "email_verified": email_verified,
        })

    def register_client(
        self,
        redirect_uris: Iterable[str],
        *,
        token_endpoint_auth_method: str = "private_key_jwt",
        jwks_uri: Optional[str] = None,
        jwks: Optional[dict] = None,
        backchannel_logout_uri: Optional[str] = None,
        backchannel_logout_session_required: bool = True,
        require_pushed_authorization_requests: bool = False,
        id_token_signed_response_alg: str = "RS256",
        **metadata,
    ) -> tuple[str, Optional[str]]:
        """Registers a client at the OP's own dynamic registration endpoint (OpenID Connect
        Registration 1.0); returns (client_id, client_secret). The registered
        `token_endpoint_auth_method` is the only one its token, revocation and PAR calls may use;
        with private_key_jwt give `jwks_uri` (fetched by the OP when it checks an assertion) or
        `jwks`."""
        body = {
            "redirect_uris": list(redirect_uris),
            "response_types": ["code"],
            "grant_types": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_method": token_endpoint_auth_method,
            "id_token_signed_response_alg": id_token_signed_response_alg,
            **metadata,
        }
        if jwks_uri:
            body["jwks_uri"] = jwks_uri
        if jwks:
            body["jwks"] = jwks
        if backchannel_logout_uri:
            body["backchannel_logout_uri"] = backchannel_logout_uri
            body["backchannel_logout_session_required"] = backchannel_logout_session_required
        if require_pushed_authorization_requests:
            body["require_pushed_authorization_requests"] = True
        answer = self._call("POST", "/registration", expect=(200, 201), json=body)
        return answer["client_id"], answer.get("client_secret")

    def client(self, client_id: str) -> dict:
        """The OP's record of a client (its secret left out)."""
        return self._call("GET", "/test/clients", params={"client_id": client_id})

    def end_sessions(self, username: str) -> dict:
        """Ends every session of `username` at the OP, as its administrator would. Each client
        with a `backchannel_logout_uri` is sent a logout token (by idpyoidc, synchronously);
        returns {"ended": [{"client_id"}], "deliveries": [{"url", "status", "logout_token"}]}."""
        return self._call("POST", "/test/end_sessions", json={"username": username})

    def seen(self) -> dict:
        """What the OP saw since start or reset_seen():
        pushed:        [{"client_id", "request_uri"}] one per accepted pushed authorization request
        authorization: [{"params": sorted parameter names, "refused": bool}] front-channel requests
        assertions:    [{"endpoint", "client_id", "method", "claims", "header"}] per token,
                       revocation or PAR request the OP parsed whole (so not one it refused, even
                       after authenticating the client); "claims"/"header" of a verified
                       private_key_jwt assertion
        logouts:       [{"url", "status", "logout_token"}] back-channel deliveries
        dpop:          [{"endpoint": "par"|"token"|"revoke"|"userinfo"|"api", "grant_type" (token
                       only), "jkt", "htm", "htu", "nonce", "ath": bool, "accepted": bool,
                       "error": None or the error answered}] one per DPoP-checked request; jkt,
                       htm, htu, nonce, ath are what its proof said (None where there was none),
                       jkt the token's for a bound token sent as Bearer."""
        return self._call("GET", "/test/seen")

    def reset_seen(self) -> None:
        self._call("POST", "/test/seen/reset")

    def rotate_dpop_nonce(self) -> str:
        """Changes the OP's DPoP nonce (with `dpop`); returns the new one."""
        return self._call("POST", "/test/dpop/rotate_nonce")["nonce"]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m support.idpy_op", description=__doc__.split("\n\n")[0])
    parser.add_argument("--client-for", required=True, help="the broker's public URL")
    parser.add_argument("--provider", default="corp", help="the broker's id for this provider")
    parser.add_argument("--require-par", action="store_true", help="refuse authorization requests that were not pushed")
    parser.add_argument("--dpop", action="store_true", help="bind tokens to the client's DPoP key, with nonces, and serve a DPoP API under {issuer}/api")
    args = parser.parse_args()
    broker = args.client_for.rstrip("/")
    with IdpyOP(require_par=args.require_par, dpop=args.dpop, dpop_nonce=args.dpop) as op:
        op.create_user("alice", "alice-password", name="Alice Liddell", email="alice@example.test")
        client_id, _ = op.register_client([f"{broker}/callback"], jwks_uri=f"{broker}/providers/{args.provider}/client-jwks")
        print(f"issuer={op.issuer}\nclient_id={client_id}", flush=True)
        stops = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, stops)  # so that either ends the wait, and stop() runs
        signal.sigwait(stops)


if __name__ == "__main__":
    main()
