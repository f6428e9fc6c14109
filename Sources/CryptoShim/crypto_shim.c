// Digests, HMAC, AES-GCM and random bytes. The CryptoShim target's files, CurlShim's castore.c
// (the CA store handed to libcurl) and CLibCrypto's header are the only code in the project that
// includes OpenSSL headers.
// Uses the OpenSSL 3.0 EVP API only; no deprecated calls.

#include "crypto_shim.h"
#include "fetched_digests.h"

#include <limits.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

// Algorithms fetched once for the life of the process (never freed): OpenSSL 3.0 performs a
// costly implicit fetch on every call that passes EVP_sha256() or EVP_aes_256_gcm(). If a fetch
// fails, the pointer stays NULL and every call that needs it fails.
static CRYPTO_ONCE tb_crypto_fetch_once = CRYPTO_ONCE_STATIC_INIT;
static EVP_MD *tb_crypto_sha256_md = NULL;
static EVP_MD *tb_crypto_sha384_md = NULL;
static EVP_MD *tb_crypto_sha512_md = NULL;
static EVP_CIPHER *tb_crypto_aes256gcm_cipher = NULL;

static void tb_crypto_fetch_algorithms(void) {
    tb_crypto_sha256_md = EVP_MD_fetch(NULL, "SHA2-256", NULL);
    tb_crypto_sha384_md = EVP_MD_fetch(NULL, "SHA2-384", NULL);
    tb_crypto_sha512_md = EVP_MD_fetch(NULL, "SHA2-512", NULL);
    tb_crypto_aes256gcm_cipher = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
    ERR_clear_error();
}

static int tb_crypto_ready(void) {
    return CRYPTO_THREAD_run_once(&tb_crypto_fetch_once, tb_crypto_fetch_algorithms) == 1;
}

const EVP_MD *tb_crypto_fetched_sha256(void) {
    return tb_crypto_ready() ? tb_crypto_sha256_md : NULL;
}

const EVP_MD *tb_crypto_fetched_sha384(void) {
    return tb_crypto_ready() ? tb_crypto_sha384_md : NULL;
}

const EVP_MD *tb_crypto_fetched_sha512(void) {
    return tb_crypto_ready() ? tb_crypto_sha512_md : NULL;
}

// Every failure path ends here, so a stale error never surfaces in unrelated OpenSSL users.
static int tb_crypto_fail(void) {
    ERR_clear_error();
    return 0;
}

int tb_crypto_random_bytes(void *out, size_t count) {
    unsigned char *p = out;
    while (count > 0) {
        int chunk = count > INT_MAX ? INT_MAX : (int)count;
        if (RAND_bytes(p, chunk) != 1) return tb_crypto_fail();
        p += chunk;
        count -= (size_t)chunk;
    }
    return 1;
}

int tb_crypto_sha256(const void *data, size_t count, void *out) {
    static const unsigned char empty = 0;
    unsigned int written = 0;
    if (!tb_crypto_ready() || tb_crypto_sha256_md == NULL) return tb_crypto_fail();
    if (EVP_Digest(count > 0 ? data : &empty, count, out, &written, tb_crypto_sha256_md, NULL) != 1
        || written != TB_CRYPTO_SHA256_BYTES) {
        return tb_crypto_fail();
    }
    return 1;
}

int tb_crypto_hmac_sha256(const void *key, size_t key_count, const void *data, size_t data_count,
                          void *out) {
    static const unsigned char empty = 0;
    size_t written = 0;
    if (EVP_Q_mac(NULL, "HMAC", NULL, "SHA2-256", NULL, key_count > 0 ? key : &empty, key_count,
                  data_count > 0 ? data : &empty, data_count, out, TB_CRYPTO_SHA256_BYTES,
                  &written) == NULL
        || written != TB_CRYPTO_SHA256_BYTES) {
        return tb_crypto_fail();
    }
    return 1;
}

// Feeds `count` bytes through EVP_CipherUpdate in int-sized chunks; `out` NULL means AAD.
static int tb_crypto_gcm_update(EVP_CIPHER_CTX *ctx, unsigned char *out, const unsigned char *in,
                                size_t count, size_t *written) {
    while (count > 0) {
        int chunk = count > INT_MAX ? INT_MAX : (int)count;
        int produced = 0;
        if (EVP_CipherUpdate(ctx, out == NULL ? NULL : out + *written, &produced, in, chunk) != 1
            || produced < 0) {
            return 0;
        }
        if (out != NULL) *written += (size_t)produced;
        in += chunk;
        count -= (size_t)chunk;
    }
    return 1;
}

// Shared body of seal (encrypt = 1: writes `tag`) and open (encrypt = 0: checks `tag`).
// `tag` is copied through a local buffer because OpenSSL's ctrl takes a non-const pointer.
static int tb_crypto_aes256gcm(int encrypt, const void *key, const void *nonce, const void *aad,
                               size_t aad_count, const void *in, size_t count, void *out,
                               const void *expected_tag, void *tag_out) {
    EVP_CIPHER_CTX *ctx = NULL;
    unsigned char tag[TB_CRYPTO_GCM_TAG_BYTES];
    unsigned char no_output[TB_CRYPTO_GCM_TAG_BYTES]; // GCM's final step emits no bytes
    size_t written = 0;
    int final_out = 0;
    int ok = 0;
    if (!tb_crypto_ready() || tb_crypto_aes256gcm_cipher == NULL) return tb_crypto_fail();
    if ((ctx = EVP_CIPHER_CTX_new()) == NULL) return tb_crypto_fail();
    if (EVP_CipherInit_ex2(ctx, tb_crypto_aes256gcm_cipher, key, nonce, encrypt, NULL) != 1)
        goto done;
    if (!tb_crypto_gcm_update(ctx, NULL, aad, aad_count, &written)) goto done;
    if (!tb_crypto_gcm_update(ctx, out, in, count, &written)) goto done;
    if (!encrypt) {
        memcpy(tag, expected_tag, sizeof tag);
        if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, sizeof tag, tag) != 1) goto done;
    }
    if (EVP_CipherFinal_ex(ctx, count > 0 ? (unsigned char *)out + written : no_output,
                           &final_out) != 1
        || final_out < 0)
        goto done;
    written += (size_t)final_out;
    if (written != count) goto done;
    if (encrypt) {
        if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, sizeof tag, tag) != 1) goto done;
        memcpy(tag_out, tag, sizeof tag);
    }
    ok = 1;
done:
    EVP_CIPHER_CTX_free(ctx);
    if (!ok) {
        if (count > 0) OPENSSL_cleanse(out, count);
        return tb_crypto_fail();
    }
    return 1;
}

int tb_crypto_aes256gcm_seal(const void *key, const void *nonce, const void *aad,
                             size_t aad_count, const void *plaintext, size_t count,
                             void *ciphertext, void *tag) {
    return tb_crypto_aes256gcm(1, key, nonce, aad, aad_count, plaintext, count, ciphertext, NULL,
                               tag);
}

int tb_crypto_aes256gcm_open(const void *key, const void *nonce, const void *aad,
                             size_t aad_count, const void *ciphertext, size_t count,
                             const void *tag, void *plaintext) {
    return tb_crypto_aes256gcm(0, key, nonce, aad, aad_count, ciphertext, count, plaintext, tag,
                               NULL);
}

int tb_crypto_equal(const void *a, const void *b, size_t count) {
    if (count == 0) return 1;
    return CRYPTO_memcmp(a, b, count) == 0;
}

void tb_crypto_cleanse(void *data, size_t count) {
    if (count > 0) OPENSSL_cleanse(data, count);
}
