// JWS signature checks with public keys built from JWK members (tb_crypto_public_key_*).
// OpenSSL 3.0 EVP and OSSL_PARAM API only; no deprecated calls.

#include "crypto_shim.h"
#include "fetched_digests.h"

#include <string.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>

// The shortest RSA modulus accepted (RFC 7518 §3.3: 2048 bits or larger).
#define TB_CRYPTO_RSA_MIN_BYTES 256
// Anything longer is no real key, and would only make a check expensive.
#define TB_CRYPTO_RSA_MAX_BYTES 1024

// An EC public key: the uncompressed point 0x04 || x || y on `group`.
static EVP_PKEY *tb_crypto_ec_key(const char *group, size_t coordinate, const unsigned char *x,
                                  size_t x_count, const unsigned char *y, size_t y_count) {
    unsigned char point[1 + 2 * 66];
    EVP_PKEY *key = NULL;
    if (x_count != coordinate || y_count != coordinate) return NULL;
    point[0] = 0x04;
    memcpy(point + 1, x, coordinate);
    memcpy(point + 1 + coordinate, y, coordinate);
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)group, 0),
        OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, point, 1 + 2 * coordinate),
        OSSL_PARAM_construct_end(),
    };
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (ctx != NULL && EVP_PKEY_fromdata_init(ctx) == 1) {
        if (EVP_PKEY_fromdata(ctx, &key, EVP_PKEY_PUBLIC_KEY, params) != 1) key = NULL;
    }
    EVP_PKEY_CTX_free(ctx);
    return key;
}

// An RSA public key from its modulus and exponent (big-endian, as JWK writes them).
static EVP_PKEY *tb_crypto_rsa_key(const unsigned char *n, size_t n_count, const unsigned char *e,
                                   size_t e_count) {
    EVP_PKEY *key = NULL;
    OSSL_PARAM_BLD *build = NULL;
    OSSL_PARAM *params = NULL;
    EVP_PKEY_CTX *ctx = NULL;
    BIGNUM *modulus = NULL, *exponent = NULL;
    while (n_count > 0 && n[0] == 0) { n++; n_count--; }
    if (n_count < TB_CRYPTO_RSA_MIN_BYTES || n_count > TB_CRYPTO_RSA_MAX_BYTES) return NULL;
    if (e_count == 0 || e_count > 8) return NULL;
    if ((modulus = BN_bin2bn(n, (int)n_count, NULL)) == NULL) goto done;
    if (BN_num_bits(modulus) < 8 * TB_CRYPTO_RSA_MIN_BYTES) goto done; // 2048 bits, not 2041
    if ((exponent = BN_bin2bn(e, (int)e_count, NULL)) == NULL) goto done;
    if ((build = OSSL_PARAM_BLD_new()) == NULL) goto done;
    if (OSSL_PARAM_BLD_push_BN(build, OSSL_PKEY_PARAM_RSA_N, modulus) != 1) goto done;
    if (OSSL_PARAM_BLD_push_BN(build, OSSL_PKEY_PARAM_RSA_E, exponent) != 1) goto done;
    if ((params = OSSL_PARAM_BLD_to_param(build)) == NULL) goto done;
    if ((ctx = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL)) == NULL) goto done;
    if (EVP_PKEY_fromdata_init(ctx) != 1) goto done;
    if (EVP_PKEY_fromdata(ctx, &key, EVP_PKEY_PUBLIC_KEY, params) != 1) key = NULL;
done:
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(build);
    BN_free(modulus);
    BN_free(exponent);
    return key;
}

// JWS writes an ECDSA signature as R || S of the coordinate length each; OpenSSL checks DER.
static int tb_crypto_ecdsa_der(const unsigned char *raw, size_t count, size_t coordinate,
                               unsigned char **der, size_t *der_count) {
    ECDSA_SIG *signature = NULL;
    BIGNUM *r = NULL, *s = NULL;
    int length;
    if (count != 2 * coordinate) return 0;
    if ((signature = ECDSA_SIG_new()) == NULL) return 0;
    r = BN_bin2bn(raw, (int)coordinate, NULL);
    s = BN_bin2bn(raw + coordinate, (int)coordinate, NULL);
    if (r == NULL || s == NULL || ECDSA_SIG_set0(signature, r, s) != 1) {
        BN_free(r);
        BN_free(s);
        ECDSA_SIG_free(signature);
        return 0;
    }
    *der = NULL;
    length = i2d_ECDSA_SIG(signature, der);
    ECDSA_SIG_free(signature);
    if (length <= 0) return 0;
    *der_count = (size_t)length;
    return 1;
}

void *tb_crypto_public_key_new(int algorithm, const void *a, size_t a_count, const void *b,
                               size_t b_count) {
    EVP_PKEY *key = NULL;
    switch (algorithm) {
    case TB_CRYPTO_ES256:
        key = tb_crypto_ec_key("P-256", 32, a, a_count, b, b_count);
        break;
    case TB_CRYPTO_ES384:
        key = tb_crypto_ec_key("P-384", 48, a, a_count, b, b_count);
        break;
    case TB_CRYPTO_ES512:
        key = tb_crypto_ec_key("P-521", 66, a, a_count, b, b_count);
        break;
    case TB_CRYPTO_RS256:
    case TB_CRYPTO_RS384:
    case TB_CRYPTO_RS512:
    case TB_CRYPTO_PS256:
    case TB_CRYPTO_PS384:
    case TB_CRYPTO_PS512:
        key = tb_crypto_rsa_key(a, a_count, b, b_count);
        break;
    case TB_CRYPTO_ED25519:
        if (a_count == 32 && b_count == 0)
            key = EVP_PKEY_new_raw_public_key_ex(NULL, "ED25519", NULL, a, a_count);
        break;
    default:
        break;
    }
    ERR_clear_error();
    return key;
}

void tb_crypto_public_key_free(void *key) {
    EVP_PKEY_free(key);
}

int tb_crypto_public_key_verify(void *key, int algorithm, const void *data, size_t data_count,
                                const void *signature, size_t signature_count) {
    static const unsigned char empty = 0;
    EVP_MD_CTX *md = NULL;
    EVP_PKEY_CTX *pctx = NULL;
    unsigned char *der = NULL;
    const unsigned char *checked = signature;
    size_t checked_count = signature_count;
    const EVP_MD *digest = NULL;
    int ok = 0;
    switch (algorithm) {
    case TB_CRYPTO_ES256:
    case TB_CRYPTO_ES384:
    case TB_CRYPTO_ES512: {
        size_t coordinate = algorithm == TB_CRYPTO_ES256 ? 32 : algorithm == TB_CRYPTO_ES384 ? 48 : 66;
        digest = algorithm == TB_CRYPTO_ES256 ? tb_crypto_fetched_sha256()
            : algorithm == TB_CRYPTO_ES384 ? tb_crypto_fetched_sha384() : tb_crypto_fetched_sha512();
        if (!tb_crypto_ecdsa_der(signature, signature_count, coordinate, &der, &checked_count))
            goto done;
        checked = der;
        break;
    }
    case TB_CRYPTO_RS256:
    case TB_CRYPTO_PS256:
        digest = tb_crypto_fetched_sha256();
        break;
    case TB_CRYPTO_RS384:
    case TB_CRYPTO_PS384:
        digest = tb_crypto_fetched_sha384();
        break;
    case TB_CRYPTO_RS512:
    case TB_CRYPTO_PS512:
        digest = tb_crypto_fetched_sha512();
        break;
    case TB_CRYPTO_ED25519:
        break;
    default:
        goto done;
    }
    if (algorithm != TB_CRYPTO_ED25519 && digest == NULL) goto done;
    if ((md = EVP_MD_CTX_new()) == NULL) goto done;
    if (EVP_DigestVerifyInit(md, &pctx, digest, NULL, key) != 1) goto done;
    if (algorithm == TB_CRYPTO_PS256 || algorithm == TB_CRYPTO_PS384 || algorithm == TB_CRYPTO_PS512) {
        if (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) != 1) goto done;
        if (EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) != 1) goto done;
    }
    ok = EVP_DigestVerify(md, checked, checked_count, data_count > 0 ? data : &empty, data_count) == 1;
done:
    OPENSSL_free(der);
    EVP_MD_CTX_free(md);
    ERR_clear_error();
    return ok;
}
