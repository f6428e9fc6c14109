// P-256 keys the broker makes and signs with (tb_crypto_p256_*): one per grant at a provider that
// binds its tokens to a key (DPoP, RFC 9449). A key is kept as its bytes (the private scalar and
// the public point), sealed with the grant; the EVP_PKEY is built for each signature and freed,
// so that a session holds 96 bytes, not libcrypto's key structures.
// OpenSSL 3.0 EVP and OSSL_PARAM API only; no deprecated calls.

#include "crypto_shim.h"

#include <string.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

enum { COORDINATE = 32 };

int tb_crypto_p256_generate(void *private_key, void *public_point) {
    int ok = 0;
    BIGNUM *d = NULL, *x = NULL, *y = NULL;
    EVP_PKEY *key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    if (key == NULL) goto done;
    if (EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_PRIV_KEY, &d) != 1) goto done;
    if (EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, &x) != 1) goto done;
    if (EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, &y) != 1) goto done;
    if (BN_bn2binpad(d, private_key, COORDINATE) != COORDINATE) goto done;
    if (BN_bn2binpad(x, public_point, COORDINATE) != COORDINATE) goto done;
    if (BN_bn2binpad(y, (unsigned char *)public_point + COORDINATE, COORDINATE) != COORDINATE) goto done;
    ok = 1;
done:
    if (!ok) OPENSSL_cleanse(private_key, COORDINATE);
    BN_clear_free(d);
    BN_free(x);
    BN_free(y);
    EVP_PKEY_free(key);
    ERR_clear_error();
    return ok;
}

// The key pair from its bytes; NULL when they are no P-256 key.
static EVP_PKEY *tb_crypto_p256_key(const unsigned char *private_key, const unsigned char *public_point) {
    unsigned char point[1 + 2 * COORDINATE];
    EVP_PKEY *key = NULL;
    OSSL_PARAM_BLD *build = NULL;
    OSSL_PARAM *params = NULL;
    EVP_PKEY_CTX *ctx = NULL;
    BIGNUM *d = BN_secure_new();
    point[0] = 0x04;
    memcpy(point + 1, public_point, 2 * COORDINATE);
    if (d == NULL || BN_bin2bn(private_key, COORDINATE, d) == NULL) goto done;
    if ((build = OSSL_PARAM_BLD_new()) == NULL) goto done;
    if (OSSL_PARAM_BLD_push_utf8_string(build, OSSL_PKEY_PARAM_GROUP_NAME, "P-256", 0) != 1) goto done;
    if (OSSL_PARAM_BLD_push_BN(build, OSSL_PKEY_PARAM_PRIV_KEY, d) != 1) goto done;
    if (OSSL_PARAM_BLD_push_octet_string(build, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point) != 1) goto done;
    if ((params = OSSL_PARAM_BLD_to_param(build)) == NULL) goto done;
    if ((ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL)) == NULL) goto done;
    if (EVP_PKEY_fromdata_init(ctx) != 1) goto done;
    if (EVP_PKEY_fromdata(ctx, &key, EVP_PKEY_KEYPAIR, params) != 1) key = NULL;
done:
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(build);
    BN_clear_free(d);
    return key;
}

int tb_crypto_p256_sign(const void *private_key, const void *public_point, const void *data, size_t data_count,
                        void *signature) {
    unsigned char signed_bytes[1024];
    size_t count = 0;
    EVP_PKEY *key = tb_crypto_p256_key(private_key, public_point);
    int ok = key != NULL && tb_crypto_private_key_sign(key, TB_CRYPTO_ES256, data, data_count, signed_bytes, &count) == 1
        && count == 2 * COORDINATE;
    if (ok) memcpy(signature, signed_bytes, 2 * COORDINATE);
    EVP_PKEY_free(key);
    ERR_clear_error();
    return ok;
}
