#ifndef CURL_SHIM_H
#define CURL_SHIM_H

#include <stddef.h>
#include <stdint.h>

/// One HTTP exchange with an API upstream (the API proxy), performed by libcurl on the calling
/// thread: no redirect followed, no proxy from the environment, only the allowed schemes, every
/// address the host resolves to vetted before connect() (loopback, private, link-local, cloud
/// metadata, multicast and reserved ranges refused unless allowed), the answer held up to a cap.
typedef struct {
    const char *method;
    const char *url;
    /// "Name: value" lines sent as they are.
    const char *const *headers;
    size_t header_count;
    const uint8_t *body;
    size_t body_length;
    /// Whether to send a body (a zero-length one too).
    int has_body;
    long timeout_ms;
    long connect_timeout_ms;
    size_t max_response_bytes;
    /// Connect to loopback and private addresses too (a provider that says so: tests, development).
    int allow_private_addresses;
    /// Allow plain http:// (else https only).
    int allow_http;
    /// Who may share connections: a request reuses only connections opened for requests with the
    /// same key (and the same address policy and schemes). The API proxy gives the session's.
    const char *connection_key;
    /// Optional: called on the transfer's thread once the answer's head is complete (a final
    /// status; `content_length` -1 when unknown). Returning 1 passes the body to `on_body` as it
    /// arrives, still counted against `max_response_bytes` (past it the transfer stops); 0 holds it
    /// in `response` as without these callbacks.
    int (*on_head)(void *context, long status, const char *headers, size_t headers_length, long long content_length);
    /// Takes body bytes when `on_head` chose to, waiting at most `wait_ms` for room (the time left
    /// to the transfer's deadline, `timeout_ms` from its start); 0 stops the transfer (nobody
    /// reads any more, or not in time).
    int (*on_body)(void *context, const uint8_t *data, size_t length, long wait_ms);
    void *context;
} tb_proxy_request;

enum tb_proxy_outcome {
    TB_PROXY_OK = 0,
    /// Every address the host resolved to was refused by the address policy.
    TB_PROXY_ADDRESS_REFUSED = 1,
    /// The answer's body was over `max_response_bytes`.
    TB_PROXY_TOO_LARGE = 2,
    TB_PROXY_TIMEOUT = 3,
    /// Name resolution, connection or TLS failed.
    TB_PROXY_UNREACHABLE = 4,
    /// Anything else (a malformed answer, an internal error).
    TB_PROXY_FAILED = 5,
};

typedef struct {
    int outcome;
    long status;
    /// The final answer's header lines ("Name: value\r\n"…, without the status line), malloc'd.
    char *headers;
    size_t headers_length;
    /// The answer's body, malloc'd.
    uint8_t *body;
    size_t body_length;
    /// libcurl's fixed description of a failure's code (never a URL, header or body).
    char error[256];
    /// The body went to `on_body`, not into `body`.
    int streamed;
} tb_proxy_response;

/// Initialises libcurl once; call before any other thread uses it.
void tb_proxy_global_init(void);

/// Performs `request`; fills `response` (free it with tb_proxy_response_free). Connections are
/// kept for reuse between calls with the same `connection_key` in a small pool of handles, and
/// only after an answer libcurl framed exactly (never after a HEAD, a 1xx, 204 or 304, or a
/// failure). A 101 fails at once. Fails (TB_PROXY_FAILED) when libcurl refuses an option.
void tb_proxy_perform(const tb_proxy_request *request, tb_proxy_response *response);

void tb_proxy_response_free(tb_proxy_response *response);

/// Whether the address policy refuses `address` (an IPv4 or IPv6 literal); -1 when it is not one.
int tb_proxy_address_refused(const char *address);

#endif
