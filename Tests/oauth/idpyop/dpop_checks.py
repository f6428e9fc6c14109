"""DPoP (RFC 9449) checks for the tests' OpenID Provider (server.py; op_provider.py and
dpop_handler.py wire them in).

idpyoidc 5's own DPoP add-on is incomplete (its proof check is installed only as a userinfo hook,
compares `ath` with a hex digest where §4.2 says base64url, and has no nonces), so the proof is
checked here, by hand, before idpyoidc sees the request:

- DPoPChecker.check(): one compact JWS in the `DPoP` header; header `typ` "dpop+jwt", `alg` in
  ALGS (never "none"), a public `jwk` (no private members) whose signature verifies; claims `htm`
  == the request method, `htu` == the request URL without query and fragment (both normalised as
  RFC 3986 §6.2.2-6.2.3 say: case of scheme and host, default port), `iat` within IAT_WINDOW
  seconds of now, and, for a resource, `ath` == base64url(sha256(access token)) and the key's
  RFC 7638 thumbprint == the token's `cnf.jkt`; then, when nonces are on, `nonce` == the OP's
  current one (`use_dpop_nonce` otherwise, §8/§9); last, `jti` never seen before (kept).
- access_token_claims(): an access token this OP signed (a JWT of idpyoidc's JWTToken), of its
  issuer, of class access_token, not expired.
- peek(): what a proof claims, unverified, for the OP's record of what it saw.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from dataclasses import dataclass
from typing import Optional
from urllib.parse import urlsplit, urlunsplit

from cryptojwt.jwk.jwk import key_from_jwk_dict
from cryptojwt.jws.dsa import ECDSASigner
from cryptojwt.jwt import JWT

ALGS = ["ES256"]
IAT_WINDOW = 60
PRIVATE_MEMBERS = {"d", "p", "q", "dp", "dq", "qi", "oth", "k"}
DEFAULT_PORTS = {"http": 80, "https": 443}


class DPoPError(Exception):
    """`error` is invalid_dpop_proof, use_dpop_nonce or invalid_token."""

    def __init__(self, error: str, description: str):
        super().__init__(description)
        self.error = error
        self.description = description


@dataclass
class Proof:
    jkt: str
    claims: dict


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _b64url_json(part: str) -> dict:
    value = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


def token_hash(access_token: str) -> str:
    """RFC 9449 §4.2 `ath`: base64url(sha256(ASCII access token)), unpadded."""
    return b64url(hashlib.sha256(access_token.encode("ascii")).digest())


def ec_thumbprint(jwk: dict) -> str:
    """RFC 7638 SHA-256 thumbprint of an EC key: its required members, sorted, no whitespace."""
    members = {k: jwk[k] for k in ("crv", "kty", "x", "y")}
    return b64url(hashlib.sha256(json.dumps(members, separators=(",", ":"), sort_keys=True).encode()).digest())


def normalized_url(url: str) -> str:
    """`url` without query and fragment, scheme and host lower-cased, a default port left out."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    netloc = host if port is None or port == DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", "", ""))


def peek(proof: Optional[str]) -> dict:
    """What a proof says, unverified (None where unreadable): jkt, htm, htu, nonce, ath present."""
    out = {"jkt": None, "htm": None, "htu": None, "nonce": None, "ath": False}
    try:
        header_part, claims_part, _ = (proof or "").split(".")
        header = _b64url_json(header_part)
        out["jkt"] = ec_thumbprint(header["jwk"])
    except Exception:
        pass
    try:
        claims = _b64url_json((proof or "").split(".")[1])
        out.update(htm=claims.get("htm"), htu=claims.get("htu"), nonce=claims.get("nonce"), ath="ath" in claims)
    except Exception:
        pass
    return out


def access_token_claims(keyjar, issuer: str, token: str) -> dict:
    """The claims of an access token this OP signed and that has not expired; DPoPError
    invalid_token otherwise."""
    try:
        claims = dict(JWT(key_jar=keyjar, allowed_sign_algs=["ES256", "RS256"]).unpack(token))
    except Exception:
        raise DPoPError("invalid_token", "not an access token signed by this OP")
    if claims.get("iss") != issuer or claims.get("token_class", claims.get("ttype")) != "access_token":
        raise DPoPError("invalid_token", "not an access token of this OP")
    if int(claims.get("exp", 0)) <= time.time():
        raise DPoPError("invalid_token", "the access token has expired")
    return claims


class DPoPChecker:
    """The OP's DPoP state: its current nonce and every `jti` it accepted."""

    def __init__(self, require_nonce: bool):
        self.require_nonce = require_nonce
        self.nonce = secrets.token_urlsafe(16)
        self.jtis: set[str] = set()

    def rotate_nonce(self) -> str:
        self.nonce = secrets.token_urlsafe(16)
        return self.nonce

    def check(
        self,
        proofs: list[str],
        method: str,
        url: str,
        *,
        access_token: Optional[str] = None,
        bound_jkt: Optional[str] = None,
    ) -> Proof:
        """`proofs`: every `DPoP` header of the request. With `access_token`, the proof must
        carry its `ath`; with `bound_jkt`, be made with that key. Raises DPoPError."""
        if not proofs:
            raise DPoPError("invalid_dpop_proof", "no DPoP proof")
        if len(proofs) > 1:
            raise DPoPError("invalid_dpop_proof", "more than one DPoP header")
        header, claims, jkt = self._verified(proofs[0])
        if header.get("typ") != "dpop+jwt":
            raise DPoPError("invalid_dpop_proof", "typ is not dpop+jwt")
        for name, kind in (("jti", str), ("htm", str), ("htu", str), ("iat", int)):
            if not isinstance(claims.get(name), kind) or isinstance(claims.get(name), bool) or claims[name] == "":
                raise DPoPError("invalid_dpop_proof", f"claim {name} missing or malformed")
        if claims["htm"] != method:
            raise DPoPError("invalid_dpop_proof", f"htm {claims['htm']} is not the request method {method}")
        try:
            same_url = normalized_url(claims["htu"]) == normalized_url(url)
        except ValueError:
            same_url = False
        if not same_url:
            raise DPoPError("invalid_dpop_proof", f"htu {claims['htu']} is not the request URL {normalized_url(url)}")
        if abs(time.time() - claims["iat"]) > IAT_WINDOW:
            raise DPoPError("invalid_dpop_proof", f"iat is more than {IAT_WINDOW} s from now")
        if access_token is not None:
            if "ath" not in claims:
                raise DPoPError("invalid_dpop_proof", "ath missing")
            if claims["ath"] != token_hash(access_token):
                raise DPoPError("invalid_dpop_proof", "ath is not the hash of the access token")
        if bound_jkt is not None and jkt != bound_jkt:
            raise DPoPError("invalid_dpop_proof", "the proof's key is not the key the token is bound to")
        if self.require_nonce and claims.get("nonce") != self.nonce:
            what = "nonce missing" if "nonce" not in claims else "nonce is not the current one"
            raise DPoPError("use_dpop_nonce", f"{what}: use the DPoP-Nonce given")
        if claims["jti"] in self.jtis:
            raise DPoPError("invalid_dpop_proof", "jti already used")
        self.jtis.add(claims["jti"])
        return Proof(jkt=jkt, claims=claims)

    @staticmethod
    def _verified(proof: str) -> tuple[dict, dict, str]:
        """Header, claims and key thumbprint of a proof whose signature verifies with its own jwk."""
        parts = proof.strip().split(".")
        if len(parts) != 3:
            raise DPoPError("invalid_dpop_proof", "not a compact JWS")
        try:
            header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
        except Exception:
            raise DPoPError("invalid_dpop_proof", "header or claims are not base64url JSON objects")
        alg = header.get("alg")
        if alg not in ALGS:
            raise DPoPError("invalid_dpop_proof", f"alg {alg} is not one of {', '.join(ALGS)}")
        jwk = header.get("jwk")
        if not isinstance(jwk, dict):
            raise DPoPError("invalid_dpop_proof", "no jwk in the header")
        if PRIVATE_MEMBERS & set(jwk):
            raise DPoPError("invalid_dpop_proof", "the jwk has private key members")
        if jwk.get("kty") != "EC" or jwk.get("crv") != "P-256":
            raise DPoPError("invalid_dpop_proof", "the jwk is not a P-256 EC key")
        try:
            key = key_from_jwk_dict(jwk)
            ECDSASigner(alg).verify(f"{parts[0]}.{parts[1]}".encode(), base64.urlsafe_b64decode(
                parts[2] + "=" * (-len(parts[2]) % 4)), key.public_key())
        except Exception:
            raise DPoPError("invalid_dpop_proof", "the signature does not verify with the jwk")
        return header, claims, ec_thumbprint(jwk)
