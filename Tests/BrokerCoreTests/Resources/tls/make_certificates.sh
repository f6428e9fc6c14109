# Makes the TLS test certificates (run from this folder): self-signed for 127.0.0.1, valid for a
# century, each the certificate of a key in ../client-keys, so that the key's other forms (PKCS#1,
# SEC 1) pair with it too and the second key of each kind does not.
set -eu
for kind in rsa ec; do
    openssl req -x509 -key "../client-keys/$kind-pkcs8.pem" -out "$kind-certificate.pem" -days 36500 \
        -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1
done
