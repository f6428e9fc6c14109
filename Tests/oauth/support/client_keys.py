"""Test-only key pairs for the broker's private_key_jwt, written as PEM files.

    path = write_key(tmp_path / "broker-key.pem", "RSA")   # or "EC" (P-256)
    jwks = public_jwks(path)                               # {"keys": [...]} for inline registration
"""
from __future__ import annotations

import json
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwcrypto import jwk


def write_key(path: Path, kind: str = "RSA") -> Path:
    """A fresh private key (RSA 2048 or EC P-256) in PKCS#8 PEM at `path`, readable by its owner only."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048) if kind == "RSA" else ec.generate_private_key(ec.SECP256R1())
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    path.chmod(0o600)
    return path


def thumbprint(path: Path) -> str:
    """The key's RFC 7638 thumbprint, the `kid` the broker gives it."""
    return jwk.JWK.from_pem(path.read_bytes()).thumbprint()


def public_jwks(path: Path) -> dict:
    """The public key of the PEM file as a JWK set, with its thumbprint as `kid`."""
    key = jwk.JWK.from_pem(path.read_bytes())
    public = json.loads(key.export_public())
    public["kid"] = key.thumbprint()
    return {"keys": [public]}
