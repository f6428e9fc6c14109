// Keys read from PEM files (tb_crypto_pem_key_*): the broker's keys as a provider's client
// (private_key_jwt): RSA of 2048 bits or more, or EC P-256, private to sign client assertions
// with, or public to publish only (the second key of a rotation).
// OpenSSL 3.0 EVP and OSSL_PARAM API only; no deprecated calls.

#include "crypto_shim.h"
#include "fetched_digests.h"

#include <string.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

enum { RSA_MIN_BITS = 2048, RSA_MAX_BYTES = 1024, EC_COORDINATE = 32 };

// An encrypted key is refused rather than asked a passphrase for (OpenSSL's default callback
// would read one from the terminal).
static int tb_no_passphrase(char *buffer, int size, int writing, void *context) {
    (void)buffer; (void)size; (void)writing; (void)context;
    return -1;
}

// The kind of a key the broker takes, or 0.
static int tb_kind(EVP_PKEY *key) {
    if (EVP_PKEY_is_a(key, "RSA")) {
        int bits = EVP_PKEY_get_bits(key);
        return bits >= RSA_MIN_BITS && bits <= 8 * RSA_MAX_BYTES ? TB_CRYPTO_KEY_RSA : 0;
    }
    if (EVP_PKEY_is_a(key, "EC")) {
        char group[32];
        size_t length = 0;
        if (EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, &length) != 1) return 0;
        return strcmp(group, "prime256v1") == 0 || strcmp(group, "P-256") == 0 ? TB_CRYPTO_KEY_EC_P256 : 0;
    }
    return 0;
}

void *tb_crypto_pem_key_new(const void *pem, size_t pem_count, int allow_public, int *kind, int *is_private) {
    EVP_PKEY *key = NULL;
    if (pem_count > 64 * 1024) return NULL;
    BIO *bio = BIO_new_mem_buf(pem, (int)pem_count);
    if (bio == NULL) return NULL;
    key = PEM_read_bio_PrivateKey(bio, NULL, tb_no_passphrase, NULL);
    *is_private = key != NULL;
    if (key == NULL && allow_public) {
        BIO_free(bio);
        if ((bio = BIO_new_mem_buf(pem, (int)pem_count)) == NULL) goto done;
        key = PEM_read_bio_PUBKEY(bio, NULL, tb_no_passphrase, NULL);
    }
    if (key != NULL && (*kind = tb_kind(key)) == 0) {
        EVP_PKEY_free(key);
        key = NULL;
    }
done:
    BIO_free(bio);
    ERR_clear_error();
    return key;
}

// A big number's bytes, big-endian and unpadded, into `out` of `capacity`.
static int tb_bn_param(EVP_PKEY *key, const char *name, unsigned char *out, size_t capacity, size_t *count, int padded) {
    BIGNUM *number = NULL;
    int ok = 0;
    if (EVP_PKEY_get_bn_param(key, name, &number) != 1) return 0;
    int length = padded ? (int)capacity : BN_num_bytes(number);
    if (length > 0 && (size_t)length <= capacity && BN_bn2binpad(number, out, length) == length) {
        *count = (size_t)length;
        ok = 1;
    }
    BN_free(number);
    return ok;
}

int tb_crypto_pem_key_public_members(void *key, void *a, size_t *a_count, void *b, size_t *b_count) {
    int ok;
    if (EVP_PKEY_is_a(key, "RSA")) {
        ok = tb_bn_param(key, OSSL_PKEY_PARAM_RSA_N, a, RSA_MAX_BYTES, a_count, 0)
            && tb_bn_param(key, OSSL_PKEY_PARAM_RSA_E, b, 8, b_count, 0);
    } else {
        ok = tb_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, a, EC_COORDINATE, a_count, 1)
            && tb_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, b, EC_COORDINATE, b_count, 1);
    }
    ERR_clear_error();
    return ok;
}

int tb_crypto_private_key_sign(void *key, int algorithm, const void *data, size_t data_count, void *signature,
                           size_t *signature_count) {
    static const unsigned char empty = 0;
    unsigned char der[160];
    size_t length = 0;
    int ok = 0;
    EVP_MD_CTX *md = NULL;
    EVP_PKEY_CTX *pctx = NULL;
    ECDSA_SIG *parsed = NULL;
    const EVP_MD *sha256 = tb_crypto_fetched_sha256();
    int rsa = EVP_PKEY_is_a(key, "RSA");
    if (sha256 == NULL) goto done;
    int fits = rsa ? algorithm == TB_CRYPTO_RS256 || algorithm == TB_CRYPTO_PS256 : algorithm == TB_CRYPTO_ES256;
    if (!fits) goto done;
    if ((md = EVP_MD_CTX_new()) == NULL) goto done;
    if (EVP_DigestSignInit(md, &pctx, sha256, NULL, key) != 1) goto done;
    if (algorithm == TB_CRYPTO_PS256) {
        if (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) != 1) goto done;
        if (EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) != 1) goto done;
    }
    const unsigned char *input = data_count > 0 ? data : &empty;
    if (rsa) {
        if (EVP_DigestSign(md, NULL, &length, input, data_count) != 1 || length > RSA_MAX_BYTES) goto done;
        if (EVP_DigestSign(md, signature, &length, input, data_count) != 1) goto done;
        *signature_count = length;
        ok = 1;
    } else {
        const BIGNUM *r = NULL, *s = NULL;
        const unsigned char *cursor = der;
        length = sizeof der;
        if (EVP_DigestSign(md, der, &length, input, data_count) != 1) goto done;
        if ((parsed = d2i_ECDSA_SIG(NULL, &cursor, (long)length)) == NULL) goto done;
        ECDSA_SIG_get0(parsed, &r, &s);
        if (BN_bn2binpad(r, signature, EC_COORDINATE) != EC_COORDINATE) goto done;
        if (BN_bn2binpad(s, (unsigned char *)signature + EC_COORDINATE, EC_COORDINATE) != EC_COORDINATE) goto done;
        *signature_count = 2 * EC_COORDINATE;
        ok = 1;
    }
done:
    ECDSA_SIG_free(parsed);
    EVP_MD_CTX_free(md);
    ERR_clear_error();
    return ok;
}
