"""DPoP in the benchmark (bench/run.py, docs/benchmark.md): `GET /token` for a session bound to a
key (RFC 9449), each request with a proof of its own, beside the same request with a bearer token.

- `bind_session`: signs in through the development provider and redeems the code with a proof of
  a new ES256 key (the README's walk-through, plus the `DPoP` header): a bound session.
- `write_proofs`: a file for bench/token.lua's PICK "once": one line per request, the session
  token then a tab then `DPoP: <proof>` (token.lua turns the tab into the line break between the
  two headers). Each proof has its own `jti` and an `iat` a few seconds ahead, so that every one
  is still fresh (60 s) when wrk sends it; each is sent once, as a client sends them.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import secrets
import time
import urllib.parse

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

REDIRECT_URI = "http://127.0.0.1/callback"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class ProofKey:
    """An ES256 key pair and the proofs it signs."""

    def __init__(self) -> None:
        self.private = ec.generate_private_key(ec.SECP256R1())
        numbers = self.private.public_key().public_numbers()
        self.jwk = {"kty": "EC", "crv": "P-256", "x": b64(numbers.x.to_bytes(32, "big")), "y": b64(numbers.y.to_bytes(32, "big"))}
        self.header = b64(json.dumps({"typ": "dpop+jwt", "alg": "ES256", "jwk": self.jwk}, separators=(",", ":")).encode())

    def proof(self, method: str, url: str, token: str | None = None, issued_at: int | None = None) -> str:
        claims = {"jti": secrets.token_urlsafe(12), "htm": method, "htu": url, "iat": issued_at or int(time.time())}
        if token:
            claims["ath"] = b64(hashlib.sha256(token.encode()).digest())
        signing_input = f"{self.header}.{b64(json.dumps(claims, separators=(',', ':')).encode())}"
        r, s = decode_dss_signature(self.private.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        return f"{signing_input}.{b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


def request(port: int, method: str, path: str, headers: dict | None = None, body: str | None = None) -> tuple[int, dict, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        answer = connection.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        connection.close()


def bind_session(port: int) -> tuple[str, ProofKey]:
    """A session of the development provider's `alice`, bound to a new key: (token, key)."""
    key = ProofKey()
    verifier = secrets.token_urlsafe(48)
    challenge = b64(hashlib.sha256(verifier.encode()).digest())
    query = urllib.parse.urlencode({"provider": "dev", "app": "demo", "redirect_uri": REDIRECT_URI,
                                    "code_challenge": challenge, "code_challenge_method": "S256"})
    status, headers, _ = request(port, "GET", f"/authorize?{query}")
    assert status == 302, f"/authorize: {status}"
    sign_in = urllib.parse.urlsplit(headers["location"])
    status, headers, _ = request(port, "POST", f"{sign_in.path}?{sign_in.query}", FORM,
                                 urllib.parse.urlencode({"user": "alice", "decision": "allow"}))
    assert status == 302, f"sign-in: {status}"
    callback = urllib.parse.urlsplit(headers["location"])
    status, headers, _ = request(port, "GET", f"{callback.path}?{callback.query}")
    assert status == 302, f"/callback: {status}"
    code = urllib.parse.parse_qs(urllib.parse.urlsplit(headers["location"]).query)["code"][0]
    status, _, body = request(port, "POST", "/token", FORM | {"DPoP": key.proof("POST", f"http://127.0.0.1:{port}/token")},
                              urllib.parse.urlencode({"grant_type": "authorization_code", "code": code, "code_verifier": verifier,
                                                      "redirect_uri": REDIRECT_URI, "app": "demo"}))
    answer = json.loads(body)
    assert status == 200 and answer.get("session_token_type") == "DPoP", f"POST /token with a proof: {status} {body[:200]!r}"
    token = answer["session_token"]
    status, _, body = request(port, "GET", "/token", {"Authorization": f"DPoP {token}",
                                                      "DPoP": key.proof("GET", f"http://127.0.0.1:{port}/token", token)})
    assert status == 200, f"GET /token with a proof: {status} {body[:200]!r}"
    return token, key


def write_proofs(path: str, port: int, token: str, key: ProofKey, count: int) -> None:
    """`count` lines of `token<TAB>DPoP: <proof>` for `GET /token` at `port`, each proof new."""
    url = f"http://127.0.0.1:{port}/token"
    issued_at = int(time.time()) + 5  # within the broker's 10 s of clock skew; fresh for a minute after
    with open(path, "w") as f:
        for _ in range(count):
            f.write(f"{token}\tDPoP: {key.proof('GET', url, token, issued_at)}\n")
