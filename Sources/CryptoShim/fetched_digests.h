// The digests crypto_shim.c fetches once for the life of the process, for signature.c and
// signing_key.c (an
// implicit fetch by name costs a lookup on every call). Private to CryptoShim: the public header
// includes no OpenSSL header. NULL when the fetch failed.

#ifndef TB_CRYPTO_FETCHED_DIGESTS_H
#define TB_CRYPTO_FETCHED_DIGESTS_H

#include <openssl/evp.h>

const EVP_MD *tb_crypto_fetched_sha256(void);
const EVP_MD *tb_crypto_fetched_sha384(void);
const EVP_MD *tb_crypto_fetched_sha512(void);

#endif
