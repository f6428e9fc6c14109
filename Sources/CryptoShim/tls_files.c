// The certificate chain and private key the broker serves HTTPS with (tb_crypto_certificate_*,
// tb_crypto_tls_key_new), read only to check them when the configuration is loaded: GnuTLS,
// which serves them, reports a bad pair as nothing more than a failed start.
// OpenSSL 3.0 API only; no deprecated calls.

#include "crypto_shim.h"

#include <limits.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

// Refuses an encrypted key rather than asking for a passphrase (OpenSSL's default callback would
// read one from the terminal), and notes that it was asked, so that the caller can say why.
static int tb_note_passphrase_asked(char *buffer, int size, int writing, void *asked) {
    (void)buffer; (void)size; (void)writing;
    *(int *)asked = 1;
    return -1;
}

void *tb_crypto_certificate_new(const void *pem, size_t pem_count) {
    X509 *first = NULL, *next = NULL;
    if (pem_count > INT_MAX) return NULL;
    ERR_clear_error(); // the end-of-chain check below reads the queue's last error
    BIO *bio = BIO_new_mem_buf(pem, (int)pem_count);
    if (bio == NULL) return NULL;
    first = PEM_read_bio_X509(bio, NULL, NULL, NULL);
    // The rest of the chain must parse too: GnuTLS refuses a chain with one bad certificate.
    while (first != NULL && (next = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) X509_free(next);
    unsigned long error = ERR_peek_last_error();
    if (first != NULL && !(ERR_GET_LIB(error) == ERR_LIB_PEM && ERR_GET_REASON(error) == PEM_R_NO_START_LINE)) {
        X509_free(first);
        first = NULL;
    }
    BIO_free(bio);
    ERR_clear_error();
    return first;
}

void tb_crypto_certificate_free(void *certificate) {
    X509_free(certificate);
}

void *tb_crypto_tls_key_new(const void *pem, size_t pem_count, int *encrypted) {
    *encrypted = 0;
    if (pem_count > INT_MAX) return NULL;
    BIO *bio = BIO_new_mem_buf(pem, (int)pem_count);
    if (bio == NULL) return NULL;
    EVP_PKEY *key = PEM_read_bio_PrivateKey(bio, NULL, tb_note_passphrase_asked, encrypted);
    BIO_free(bio);
    ERR_clear_error();
    return key;
}

int tb_crypto_certificate_matches_key(void *certificate, void *key) {
    int matches = X509_check_private_key(certificate, key);
    ERR_clear_error();
    return matches == 1;
}
