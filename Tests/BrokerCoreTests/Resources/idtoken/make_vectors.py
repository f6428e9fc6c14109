#!/usr/bin/env python3
"""Writes the ID-token test vectors beside this file: key sets (JWKS) and signed tokens.

Run it in a throwaway virtual environment:

    python3 -m venv /tmp/idt-venv
    /tmp/idt-venv/bin/pip install cryptography PyJWT
    /tmp/idt-venv/bin/python make_vectors.py

Every run makes new keys, so it rewrites every output together; commit them together. The
constants below are repeated in IDTokenTestSupport.swift.
"""

import base64
import hashlib
import hmac
import json
import pathlib

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

HERE = pathlib.Path(__file__).resolve().parent

ISSUER = "https://idp.example.test"
CLIENT_ID = "broker-client"
NONCE = "n-0S6_WzA2Mj"
FAR_FUTURE = 4102444800  # 2100-01-01T00:00:00Z
ISSUED_AT = 1700000000  # 2023-11-14T22:13:20Z
TIMED_IAT = 1800000000  # 2027-01-15T08:00:00Z
TIMED_EXP = TIMED_IAT + 3600


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_json(value) -> str:
    return b64url(json.dumps(value, separators=(",", ":")).encode())


def uint(value: int) -> str:
    return b64url(value.to_bytes((value.bit_length() + 7) // 8, "big"))


def rsa_jwk(key, kid, **extra):
    numbers = key.public_key().public_numbers()
    return {"kty": "RSA", "kid": kid, **extra, "n": uint(numbers.n), "e": uint(numbers.e)}


def ec_jwk(key, kid, **extra):
    numbers = key.public_key().public_numbers()
    return {"kty": "EC", "kid": kid, **extra, "crv": "P-256",
            "x": b64url(numbers.x.to_bytes(32, "big")), "y": b64url(numbers.y.to_bytes(32, "big"))}


def ed_jwk(key, kid, **extra):
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return {"kty": "OKP", "kid": kid, **extra, "crv": "Ed25519", "x": b64url(raw)}


def claims(**changes):
    base = {
        "iss": ISSUER,
        "sub": "user-123",
        "aud": CLIENT_ID,
        "exp": FAR_FUTURE,
        "iat": ISSUED_AT,
        "nonce": NONCE,
        "email": "ada@example.test",
        "email_verified": True,
        "name": "Ada Lovelace",
        "picture": "https://idp.example.test/ada.png",
    }
    base.update(changes)
    return {key: value for key, value in base.items() if value is not None}


def main():
    rsa1 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    rsa2 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    rsa_enc = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec1 = ec.generate_private_key(ec.SECP256R1())
    ed1 = ed25519.Ed25519PrivateKey.generate()
    oct_secret = b"an-hmac-secret-that-must-never-be-used-for-id-tokens"

    rsa1_jwk = rsa_jwk(rsa1, "rsa-1", use="sig", alg="RS256")
    base_keys = [
        rsa1_jwk,
        ec_jwk(ec1, "ec-1", use="sig"),  # no alg: the token's alg decides, within the curve
        ed_jwk(ed1, "ed-1", alg="EdDSA"),
        {"kty": "oct", "kid": "oct-1", "alg": "HS256", "k": b64url(oct_secret)},
        # Encryption keys: nothing but `use` or `key_ops` says they are not for signatures.
        rsa_jwk(rsa_enc, "rsa-enc", use="enc"),
        rsa_jwk(rsa_enc, "rsa-ops", key_ops=["encrypt", "wrapKey"]),
    ]
    rotated_keys = base_keys + [rsa_jwk(rsa2, "rsa-2")]  # no alg, no use
    write_json("jwks.json", {"keys": base_keys})
    write_json("jwks-rotated.json", {"keys": rotated_keys})
    write_json("jwks-single.json", {"keys": [rsa1_jwk]})

    def sign(name, payload, key, alg, kid):
        headers = {"kid": kid} if kid is not None else {}
        token = jwt.encode(payload, key, algorithm=alg, headers=headers)
        write_token(name, token)
        return token

    valid = sign("valid-rs256", claims(), rsa1, "RS256", "rsa-1")
    sign("valid-es256", claims(aud=[CLIENT_ID]), ec1, "ES256", "ec-1")
    sign("valid-eddsa", claims(), ed1, "EdDSA", "ed-1")
    sign("rotated-ps256", claims(), rsa2, "PS256", "rsa-2")
    sign("no-kid", claims(), rsa1, "RS256", None)

    # Signature over the original payload, payload swapped for another subject afterwards.
    header, _, signature = valid.split(".")
    write_token("tampered", ".".join([header, b64url_json(claims(sub="admin")), signature]))

    write_token("alg-none", b64url_json({"alg": "none", "typ": "JWT"}) + "." + b64url_json(claims()) + ".")

    # The classic key-confusion attack: HMAC keyed with the bytes of the RSA public key.
    public_pem = rsa1.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    write_token("hs256-public-key", hs256({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}, claims(), public_pem))
    write_token("hs256-oct", hs256({"alg": "HS256", "typ": "JWT", "kid": "oct-1"}, claims(), oct_secret))

    sign("rs256-kid-oct", claims(), rsa1, "RS256", "oct-1")
    sign("rs256-kid-enc", claims(), rsa_enc, "RS256", "rsa-enc")
    sign("rs256-kid-ops", claims(), rsa_enc, "RS256", "rsa-ops")
    sign("unknown-kid", claims(), rsa1, "RS256", "no-such-key")
    sign("ps256-on-rs256-key", claims(), rsa1, "PS256", "rsa-1")

    sign("wrong-iss", claims(iss="https://evil.example.test"), rsa1, "RS256", "rsa-1")
    sign("wrong-aud", claims(aud="someone-else"), rsa1, "RS256", "rsa-1")
    sign("multi-aud-no-azp", claims(aud=[CLIENT_ID, "other-client"]), rsa1, "RS256", "rsa-1")
    sign("multi-aud-wrong-azp", claims(aud=[CLIENT_ID, "other-client"], azp="other-client"), rsa1, "RS256", "rsa-1")
    sign("multi-aud-azp", claims(aud=[CLIENT_ID, "other-client"], azp=CLIENT_ID), rsa1, "RS256", "rsa-1")
    sign("timed", claims(iat=TIMED_IAT, exp=TIMED_EXP), rsa1, "RS256", "rsa-1")
    sign("iat-future", claims(iat=FAR_FUTURE - 3600), rsa1, "RS256", "rsa-1")
    sign("nbf-future", claims(nbf=FAR_FUTURE - 3600), rsa1, "RS256", "rsa-1")
    sign("no-nonce", claims(nonce=None), rsa1, "RS256", "rsa-1")
    sign("no-sub", claims(sub=None), rsa1, "RS256", "rsa-1")


def hs256(header, payload, secret: bytes) -> str:
    signing_input = b64url_json(header) + "." + b64url_json(payload)
    mac = hmac.new(secret, signing_input.encode("ascii"), hashlib.sha256).digest()
    return signing_input + "." + b64url(mac)


def write_json(name, value):
    (HERE / name).write_text(json.dumps(value, indent=2) + "\n")


def write_token(name, token):
    (HERE / f"{name}.jwt").write_text(token + "\n")


if __name__ == "__main__":
    main()
