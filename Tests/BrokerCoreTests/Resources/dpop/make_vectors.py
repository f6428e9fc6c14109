# Makes proofs.json: one DPoP proof (RFC 9449) per algorithm the broker accepts, made by jwskate
# (another implementation than the broker's), with its key's RFC 7638 thumbprint. Run with the
# tests' venv: .venv/bin/python make_vectors.py > proofs.json
import base64
import hashlib
import json

from jwskate import Jwk, Jwt

token = "tbs_example-session-token"
ath = base64.urlsafe_b64encode(hashlib.sha256(token.encode()).digest()).rstrip(b"=").decode()
out = []
for alg in ["ES256", "ES384", "RS256", "PS256", "EdDSA"]:
    key = Jwk.generate(alg=alg, crv="Ed25519") if alg == "EdDSA" else Jwk.generate(alg=alg)
    claims = {"jti": f"vector-{alg}", "htm": "GET", "htu": "https://broker.example/token?x=1", "iat": 1700000000, "ath": ath}
    proof = str(Jwt.sign(claims, key=key, alg=alg, typ="dpop+jwt", extra_headers={"jwk": key.public_jwk().minimize()}))
    out.append({"alg": alg, "proof": proof, "thumbprint": key.thumbprint()})
print(json.dumps({"token": token, "proofs": out}, indent=1))
