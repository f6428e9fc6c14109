"""Makes the client-key test vectors (run from this folder with the repository's .venv).

The keys are test-only, made by openssl:
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out rsa-pkcs8.pem
  openssl pkey -in rsa-pkcs8.pem -traditional -out rsa-pkcs1.pem;  openssl pkey -in rsa-pkcs8.pem -pubout -out rsa-public.pem
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ec-pkcs8.pem
  openssl pkey -in ec-pkcs8.pem -traditional -out ec-sec1.pem;  openssl pkey -in ec-pkcs8.pem -pubout -out ec-public.pem
  rsa-second.pem and ec-second.pem (other keys of each kind), and refused ones: rsa-1024.pem, ec-p384.pem, rsa-encrypted.pem (-aes-128-cbc)
thumbprints.json holds each usable key's RFC 7638 thumbprint as jwcrypto computes it, so the
broker's own computation is checked against another implementation.
"""
import json

from jwcrypto import jwk

names = ["rsa-pkcs8.pem", "rsa-pkcs1.pem", "rsa-public.pem", "ec-pkcs8.pem", "ec-sec1.pem", "ec-public.pem", "rsa-second.pem", "ec-second.pem"]
thumbprints = {}
for name in names:
    with open(name, "rb") as f:
        key = jwk.JWK.from_pem(f.read())
    thumbprints[name] = key.thumbprint()
with open("thumbprints.json", "w") as f:
    json.dump(thumbprints, f, indent=1, sort_keys=True)
    f.write("\n")
