// The certificate authorities a transfer's TLS connections are verified against (curl_shim.h's
// tb_ca_store): parsed once, then handed to every new connection's SSL_CTX.
//
// Left to itself, libcurl reads its CA bundle for every new TLS connection: its own CA cache
// (7.87 and later) stays off whenever a CA directory is configured too, which Debian's build
// does (/etc/ssl/certs beside the bundle). Parsing 140 PEM certificates cost about 50 ms of CPU
// per new connection, so each new user's first API call through the proxy cost that much. A
// transfer that names a store sets no CA file or directory of libcurl's, and installs this
// store, shared by reference, in the SSL_CTX libcurl makes (CURLOPT_SSL_CTX_FUNCTION); libcurl
// still checks the host name.
//
// The store goes in as the context's verification store, not its certificate store: libcurl
// sets up the certificate store after the SSL_CTX function, setting verification flags on it
// for each connection, from each loop's thread — on a store shared by every connection, that
// was a write racing the other loop's verifications. With the cache on, libcurl also cached
// that store, the first connection's (one provider's), and put it back over every later
// connection's, so that one provider's CA file decided what every other provider's connections
// trusted; the cache is off for these transfers, whose store is parsed once anyway. The flags
// libcurl would set (trusted first, partial chains) are set here once.

#include "curl_internal.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tb_ca_store {
    X509_STORE *x509;
};

tb_ca_store *tb_ca_store_create(const char *extra_file, char *error, size_t error_size) {
    tb_ca_store *store = calloc(1, sizeof *store);
    X509_STORE *x509 = X509_STORE_new();
    if (store == NULL || x509 == NULL) {
        snprintf(error, error_size, "no memory for a certificate store");
        free(store);
        X509_STORE_free(x509);
        return NULL;
    }
    // The system's authorities where libcurl would find them: its bundle, else its directory
    // (looked up by hash as connections need them), else OpenSSL's defaults.
    const curl_version_info_data *curl = curl_version_info(CURLVERSION_NOW);
    int system = (curl->cainfo && X509_STORE_load_file(x509, curl->cainfo) == 1)
        || (curl->capath && X509_STORE_load_path(x509, curl->capath) == 1)
        || X509_STORE_set_default_paths(x509) == 1;
    if (!system) {
        snprintf(error, error_size, "the system's certificate authorities could not be read (%s)",
                 curl->cainfo ? curl->cainfo : curl->capath ? curl->capath : "OpenSSL's default paths");
    } else if (extra_file && X509_STORE_load_file(x509, extra_file) != 1) {
        FILE *file = fopen(extra_file, "r");
        if (file == NULL) {
            snprintf(error, error_size, "%s cannot be read (%s)", extra_file, strerror(errno));
        } else {
            fclose(file);
            snprintf(error, error_size, "%s holds no PEM certificate", extra_file);
        }
        system = 0;
    }
    ERR_clear_error();
    if (!system || X509_STORE_set_flags(x509, X509_V_FLAG_TRUSTED_FIRST | X509_V_FLAG_PARTIAL_CHAIN) != 1) {
        if (system) snprintf(error, error_size, "the certificate store's flags could not be set");
        X509_STORE_free(x509);
        free(store);
        return NULL;
    }
    store->x509 = x509;
    return store;
}

void tb_ca_store_release(tb_ca_store *store) {
    if (store == NULL) return;
    X509_STORE_free(store->x509); // connections still open keep it through their SSL_CTX
    free(store);
}

// CURLOPT_SSL_CTX_FUNCTION: a new connection's SSL_CTX verifies against the store, which nothing
// writes to after tb_ca_store_create.
static CURLcode install(CURL *easy, void *ssl_ctx, void *context) {
    (void)easy;
    const tb_ca_store *store = context;
    return SSL_CTX_set1_verify_cert_store(ssl_ctx, store->x509) == 1 ? CURLE_OK : CURLE_SSL_CERTPROBLEM;
}

int tb_ca_store_use(const tb_ca_store *store, CURL *easy) {
    return curl_easy_setopt(easy, CURLOPT_CAINFO, NULL) == CURLE_OK
        && curl_easy_setopt(easy, CURLOPT_CAPATH, NULL) == CURLE_OK
#if LIBCURL_VERSION_NUM >= 0x075700 // 7.87, the first with the cache
        && curl_easy_setopt(easy, CURLOPT_CA_CACHE_TIMEOUT, 0L) == CURLE_OK
#endif
        && curl_easy_setopt(easy, CURLOPT_SSL_CTX_FUNCTION, install) == CURLE_OK
        && curl_easy_setopt(easy, CURLOPT_SSL_CTX_DATA, store) == CURLE_OK;
}
