// CryptoShim: the few libcrypto (OpenSSL 3.0) operations BrokerCrypto needs, as plain C
// functions with fixed argument lists that Swift can call directly.
//
// This header deliberately includes no OpenSSL header: Swift sees only these functions, and
// libcrypto's macros and types stay inside crypto_shim.c. Every symbol starts with tb_crypto_.
// Every int-returning function returns 1 on success and 0 on failure; on failure the OpenSSL
// error queue of the calling thread has been cleared.
// Pointers marked _Nullable may be NULL only when their length is 0.

#ifndef TB_CRYPTO_SHIM_H
#define TB_CRYPTO_SHIM_H

#include <stddef.h>

#define TB_CRYPTO_SHA256_BYTES 32
#define TB_CRYPTO_AES256_KEY_BYTES 32
#define TB_CRYPTO_GCM_NONCE_BYTES 12
#define TB_CRYPTO_GCM_TAG_BYTES 16

#pragma clang assume_nonnull begin

// RAND_bytes takes an int count; this accepts any size_t and fills `out` from the CSPRNG.
int tb_crypto_random_bytes(void *out, size_t count);

// SHA-256 on the hot path: EVP_Digest with a digest fetched once (implicit fetches cost ~3x).
int tb_crypto_sha256(const void *_Nullable data, size_t count,
                     void *out /* TB_CRYPTO_SHA256_BYTES */);

// HMAC-SHA256 through EVP_Q_mac, so Swift needs neither EVP_MAC objects nor OSSL_PARAM arrays.
int tb_crypto_hmac_sha256(const void *_Nullable key, size_t key_count,
                          const void *_Nullable data, size_t data_count,
                          void *out /* TB_CRYPTO_SHA256_BYTES */);

// AES-256-GCM encryption in one call: the EVP sequence and its GCM ctrl macros stay in C.
// `ciphertext` receives exactly `count` bytes.
int tb_crypto_aes256gcm_seal(const void *key /* 32 */, const void *nonce /* 12 */,
                             const void *_Nullable aad, size_t aad_count,
                             const void *_Nullable plaintext, size_t count,
                             void *_Nullable ciphertext, void *tag /* 16 */);

// AES-256-GCM decryption in one call; fails (and zeroes `plaintext`) when the tag does not
// verify. `plaintext` receives exactly `count` bytes.
int tb_crypto_aes256gcm_open(const void *key /* 32 */, const void *nonce /* 12 */,
                             const void *_Nullable aad, size_t aad_count,
                             const void *_Nullable ciphertext, size_t count,
                             const void *tag /* 16 */, void *_Nullable plaintext);

// CRYPTO_memcmp returns 0 for "equal"; this returns 1 for equal so it reads as a Bool in Swift.
int tb_crypto_equal(const void *_Nullable a, const void *_Nullable b, size_t count);

// OPENSSL_cleanse: zeroes key material in a way the compiler may not optimise away.
void tb_crypto_cleanse(void *_Nullable data, size_t count);

// JWS signature algorithms tb_crypto_verify_signature checks (RFC 7518 §3, RFC 8037).
#define TB_CRYPTO_ES256 1
#define TB_CRYPTO_ES384 2
#define TB_CRYPTO_RS256 3
#define TB_CRYPTO_PS256 4
#define TB_CRYPTO_ED25519 5
#define TB_CRYPTO_RS384 6
#define TB_CRYPTO_RS512 7
#define TB_CRYPTO_PS384 8
#define TB_CRYPTO_PS512 9
#define TB_CRYPTO_ES512 10

// A public key built from its JWK members, to check JWS signatures with (signature.c): `x` and
// `y` for ES256/ES384/ES512 (each the curve's coordinate length), `n` and `e` for RS* and PS*
// (n of 2048 bits or more), `x` for Ed25519 (`b` empty). NULL when the key is unusable (a point
// off the curve, a short modulus, a wrong length). Free it with tb_crypto_public_key_free; it may
// be used by several threads at once.
void *_Nullable tb_crypto_public_key_new(int algorithm, const void *a, size_t a_count,
                                         const void *_Nullable b, size_t b_count);
void tb_crypto_public_key_free(void *_Nullable key);

// Checks a JWS signature over `data` with `key` (made for `algorithm`); `signature` as JWS writes
// it (R || S for ECDSA). Returns 1 when the signature is valid, 0 otherwise.
int tb_crypto_public_key_verify(void *key, int algorithm, const void *_Nullable data,
                                size_t data_count, const void *signature,
                                size_t signature_count);

// A new P-256 key (proof_key.c): its private scalar (32 bytes) and its public point x || y (64
// bytes). Returns 1, or 0 when libcrypto could not make one.
int tb_crypto_p256_generate(void *private_key, void *public_point);

// Signs `data` (ES256: ECDSA with SHA-256) with the P-256 key of those bytes; writes R || S (64
// bytes) as JWS does. Returns 1, or 0 when the bytes are no key or signing failed.
int tb_crypto_p256_sign(const void *private_key, const void *public_point,
                        const void *_Nullable data, size_t data_count, void *signature);

// Kinds of the keys tb_crypto_pem_key_new reads.
#define TB_CRYPTO_KEY_RSA 1
#define TB_CRYPTO_KEY_EC_P256 2

// A key read from PEM text (signing_key.c): RSA of 2048 bits or more, or EC P-256; a private key
// (PKCS#8, PKCS#1 or SEC 1, unencrypted), or, when `allow_public`, a public one
// (SubjectPublicKeyInfo). Sets `kind` and `is_private`. NULL when the text holds no such key.
// Free it with tb_crypto_public_key_free; it may be used by several threads at once.
void *_Nullable tb_crypto_pem_key_new(const void *pem, size_t pem_count, int allow_public,
                                      int *kind, int *is_private);

// A PEM key's public members as a JWK writes them, big-endian: `n` and `e` of an RSA key, `x`
// and `y` of an EC P-256 key; `a` holds 1024 bytes, `b` 32. The counts are set
// to the lengths written. Returns 1, or 0.
int tb_crypto_pem_key_public_members(void *key, void *a, size_t *a_count, void *b, size_t *b_count);

// Signs `data` with a private key (a PEM key's, or the EVP_PKEY proof_key.c builds): RS256 or
// PS256 with an RSA key, ES256 (R || S) with a P-256 one. `signature` holds 1024 bytes;
// `signature_count` is set. Returns 1, or 0.
int tb_crypto_private_key_sign(void *key, int algorithm, const void *_Nullable data, size_t data_count,
                           void *signature, size_t *signature_count);

// The first certificate of a PEM chain (tls_files.c); NULL when the text holds none, or when any
// certificate in it does not parse. Free it with tb_crypto_certificate_free.
void *_Nullable tb_crypto_certificate_new(const void *pem, size_t pem_count);
void tb_crypto_certificate_free(void *_Nullable certificate);

// A private key of any kind libcrypto reads from PEM text (PKCS#8, PKCS#1 or SEC 1), to serve
// HTTPS with; NULL when the text holds none, or an encrypted one (then `encrypted` is set to 1).
// Free it with tb_crypto_public_key_free.
void *_Nullable tb_crypto_tls_key_new(const void *pem, size_t pem_count, int *encrypted);

// Returns 1 when `key` is the private key of `certificate`'s public key, 0 otherwise.
int tb_crypto_certificate_matches_key(void *certificate, void *key);

#pragma clang assume_nonnull end

#endif
