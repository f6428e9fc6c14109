"""An OpenID Connect issuer of its own that forges the real server's ID tokens (no broker needed).

    with TamperProxy(auth_server) as proxy:      # or the function-scoped `tamper_proxy` fixture
        proxy.issuer        # "http://127.0.0.1:PROXYPORT/o" -- configure the broker with this
        proxy.mode = "wrong_aud"
        ...                 # broker signs a user in; its token request goes through the proxy

The proxy publishes, at `/o/.well-known/openid-configuration`, the real server's discovery
document with `issuer` set to its own issuer and `token_endpoint` / `jwks_uri` pointing at
itself; `authorization_endpoint`, `userinfo_endpoint`, `revocation_endpoint` (and everything
else) still point at the real server, where the browser signs in. (The real document is fetched
once, at start.)

`POST /o/token/` is forwarded (method, body, Authorization and the other end-to-end headers) to
the real token endpoint; the answer comes back with the same status, and when it is a JSON
object with an `id_token`, that token's claims are decoded (not verified), `iss` is set to the
proxy's issuer, the current `mode` is applied, and the token is re-signed with the proxy's own
RSA key (RS256, kid `proxy-1`), published at `/o/jwks/`. Only `id_token` changes.

Modes (`TamperProxy.MODES`; set `proxy.mode` at any time):
  valid                  only `iss` changes: a correct relying party accepts it
  bad_signature          the valid token with one byte of its signature flipped
  wrong_aud              `aud` is another client's id
  wrong_nonce            `nonce` is not the one the client sent
  missing_nonce          no `nonce` claim
  expired                `exp` an hour ago, `iat` two hours ago
  future_iat             `iat` an hour ahead (`exp` kept after it)
  wrong_issuer           `iss` left as the real server's issuer (signature still the proxy's)
  alg_none               header `{"alg": "none"}`, empty signature
  hs256_with_public_key  HS256 with the proxy's public key PEM (`public_key_pem`) as the HMAC
                         secret -- the RS256/HS256 key-confusion attack
  unknown_kid            RS256 with a second key whose kid (`unknown_kid`) is not in the JWKS

Counters (thread-safe, `reset_counts()` zeroes them): `token_requests` (forwarded token
requests), `jwks_requests`, `discovery_requests`. `id_tokens` lists `(upstream, sent)` ID token
pairs in arrival order; `request_log` the `(method, path, status)` of every request.
Any other path answers a plain 404 (wrong method on a known path: 405). The HTTP front is in
tamper_proxy_handler.py.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import json
import secrets
import threading
import time
from http.server import ThreadingHTTPServer
from typing import Optional
from urllib.parse import urlsplit

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from jwcrypto import jwk

from .issuer import LoopbackIssuer
from .tamper_proxy_handler import TamperProxyHandler

PROXY_KID = "proxy-1"

# Request headers not forwarded to the real server (hop-by-hop, or recomputed).
_SKIP_REQUEST_HEADERS = {
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
    "expect",
}
# Response headers passed back from the real token endpoint.
_PASS_RESPONSE_HEADERS = {"content-type", "cache-control", "pragma", "www-authenticate", "vary"}


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _compact_json(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


def decode_jwt_unverified(token: str) -> tuple[dict, dict]:
    """(header, claims) of a compact JWS, without checking anything."""
    head, payload, _sig = token.split(".")
    return json.loads(b64url_decode(head)), json.loads(b64url_decode(payload))


class TamperProxy(LoopbackIssuer):
    MODES = (
        "valid",
        "bad_signature",
        "wrong_aud",
        "wrong_nonce",
        "missing_nonce",
        "expired",
        "future_iat",
        "wrong_issuer",
        "alg_none",
        "hs256_with_public_key",
        "unknown_kid",
    )

    def __init__(self, auth_server, *, mode: str = "valid", host: str = "127.0.0.1", upstream_timeout: float = 60.0):
        self.auth_server = auth_server
        self.host_ip = host
        self.port: Optional[int] = None
        self.upstream_timeout = upstream_timeout
        self._mode = "valid"
        self.mode = mode
        self._lock = threading.Lock()
        self._httpd: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None
        self._discovery: Optional[dict] = None
        self.token_requests = 0
        self.jwks_requests = 0
        self.discovery_requests = 0
        self.id_tokens: list[tuple[str, str]] = []
        self.request_log: list[tuple[str, str, int]] = []
        self.kid = PROXY_KID
        self.unknown_kid = "proxy-unknown-" + secrets.token_hex(4)
        self._key: Optional[rsa.RSAPrivateKey] = None
        self._unknown_key: Optional[rsa.RSAPrivateKey] = None
        self.public_key_pem: Optional[bytes] = None

    # ----------------------------------------------------------------- mode
    @property
    def mode(self) -> str:
        return self._mode

    @mode.setter
    def mode(self, value: str) -> None:
        if value not in self.MODES:
            raise ValueError(f"unknown TamperProxy mode {value!r}; one of {', '.join(self.MODES)}")
        self._mode = value

    # ----------------------------------------------------------------- addresses
    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/token/"

    @property
    def jwks_uri(self) -> str:
        return f"{self.issuer}/jwks/"

    # ----------------------------------------------------------------- keys
    def jwks(self) -> dict:
        """The JWKS the proxy publishes: its own RSA public key only (kid proxy-1)."""
        key = jwk.JWK.from_pyca(self._key.public_key())
        data = json.loads(key.export_public())
        data.update({"kid": self.kid, "alg": "RS256", "use": "sig"})
        return {"keys": [data]}

    @property
    def unknown_key(self) -> rsa.RSAPrivateKey:
        """The second key (kid `unknown_kid`, never published) that `unknown_kid` mode signs with;
        made on first use."""
        with self._lock:
            if self._unknown_key is None:
                self._unknown_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            return self._unknown_key

    def discovery(self) -> dict:
        doc = dict(self._discovery or {})
        doc["issuer"] = self.issuer
        doc["token_endpoint"] = self.token_endpoint
        doc["jwks_uri"] = self.jwks_uri
        return doc

    # ----------------------------------------------------------------- lifecycle
    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> "TamperProxy":
        if self.running:
            return self
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.public_key_pem = self._key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self._discovery = self._fetch_upstream_discovery()
        handler = type("TamperProxyHandler", (TamperProxyHandler,), {"proxy": self})
        self._httpd = ThreadingHTTPServer((self.host_ip, 0), handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"tamper-proxy-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def reset_counts(self) -> None:
        with self._lock:
            self.token_requests = 0
            self.jwks_requests = 0
            self.discovery_requests = 0
            self.id_tokens.clear()
            self.request_log.clear()

    def _count(self, name: str) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)

    # ----------------------------------------------------------------- upstream
    def _upstream(self):
        parts = urlsplit(self.auth_server.token_endpoint)
        return parts.hostname, parts.port or 80, parts.path

    def _fetch_upstream_discovery(self) -> dict:
        parts = urlsplit(self.auth_server.discovery_url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=self.upstream_timeout)
        try:
            conn.request("GET", parts.path, headers={"Accept": "application/json"})
            resp = conn.getresponse()
            body = resp.read()
        finally:
            conn.close()
        if resp.status != 200:
            raise RuntimeError(f"upstream discovery -> {resp.status}: {body[:500]!r}")
        return json.loads(body)

    def forward_token_request(self, method: str, headers: list[tuple[str, str]], body: bytes):
        """Send the request to the real token endpoint; (status, [(header, value)], body)."""
        host, port, path = self._upstream()
        fwd = {k: v for k, v in headers if k.lower() not in _SKIP_REQUEST_HEADERS}
        fwd["Content-Length"] = str(len(body))
        conn = http.client.HTTPConnection(host, port, timeout=self.upstream_timeout)
        try:
            conn.request(method, path, body=body, headers=fwd)
            resp = conn.getresponse()
            data = resp.read()
            out_headers = [(k, v) for k, v in resp.getheaders() if k.lower() in _PASS_RESPONSE_HEADERS]
            return resp.status, out_headers, data
        finally:
            conn.close()

    # ----------------------------------------------------------------- forging
    def _sign_rs256(self, header: dict, claims: dict, key: rsa.RSAPrivateKey) -> str:
        signing_input = b64url(_compact_json(header)) + "." + b64url(_compact_json(claims))
        sig = key.sign(signing_input.encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
        return signing_input + "." + b64url(sig)

    def forge_id_token(self, upstream_id_token: str, mode: Optional[str] = None) -> str:
        """The ID token the proxy sends instead of `upstream_id_token`, in `mode` (default: the
        current mode)."""
        mode = mode or self.mode
        _header, claims = decode_jwt_unverified(upstream_id_token)
        real_issuer = claims.get("iss")
        claims = dict(claims)
        claims["iss"] = self.issuer
        now = int(time.time())
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        key = self._key

        if mode == "wrong_aud":
            claims["aud"] = "not-this-client-" + secrets.token_hex(4)
        elif mode == "wrong_nonce":
            claims["nonce"] = "forged-nonce-" + secrets.token_urlsafe(8)
        elif mode == "missing_nonce":
            claims.pop("nonce", None)
        elif mode == "expired":
            claims["exp"] = now - 3600
            claims["iat"] = now - 7200
            if "auth_time" in claims:
                claims["auth_time"] = now - 7200
        elif mode == "future_iat":
            claims["iat"] = now + 3600
            claims["exp"] = max(int(claims.get("exp", 0)), now + 7200)
        elif mode == "wrong_issuer":
            claims["iss"] = real_issuer or self.auth_server.issuer
        elif mode == "alg_none":
            header = {"alg": "none", "typ": "JWT"}
            return b64url(_compact_json(header)) + "." + b64url(_compact_json(claims)) + "."
        elif mode == "hs256_with_public_key":
            header = {"alg": "HS256", "typ": "JWT", "kid": self.kid}
            signing_input = b64url(_compact_json(header)) + "." + b64url(_compact_json(claims))
            mac = hmac.new(self.public_key_pem, signing_input.encode("ascii"), hashlib.sha256).digest()
            return signing_input + "." + b64url(mac)
        elif mode == "unknown_kid":
            header = {"alg": "RS256", "typ": "JWT", "kid": self.unknown_kid}
            key = self.unknown_key

        token = self._sign_rs256(header, claims, key)
        if mode == "bad_signature":
            head, payload, sig = token.split(".")
            raw = bytearray(b64url_decode(sig))
            raw[len(raw) // 2] ^= 0x01
            token = f"{head}.{payload}.{b64url(bytes(raw))}"
        return token

    def rewrite_token_response(self, body: bytes) -> bytes:
        """The token endpoint's JSON answer with its id_token forged; other bodies unchanged."""
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return body
        if not isinstance(data, dict) or not isinstance(data.get("id_token"), str):
            return body
        upstream = data["id_token"]
        data["id_token"] = self.forge_id_token(upstream)
        with self._lock:
            self.id_tokens.append((upstream, data["id_token"]))
        return json.dumps(data).encode("utf-8")
