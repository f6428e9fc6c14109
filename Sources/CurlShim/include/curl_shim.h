#ifndef CURL_SHIM_H
#define CURL_SHIM_H

#include <stddef.h>
#include <stdint.h>

/// The API proxy's HTTP client: libcurl's multi interface driven by one thread (loop.c), which
/// runs every transfer of its loop — no thread per transfer, none blocked by a slow reader. Each
/// transfer: no redirect followed, no proxy from the environment, only the allowed schemes, every
/// address the host resolves to vetted before connect() (loopback, private, link-local, cloud
/// metadata, multicast and reserved ranges refused unless allowed), the answer held up to a cap.
typedef struct tb_proxy_loop tb_proxy_loop;

/// The certificate authorities TLS connections are verified against: the system's, and those of
/// one more PEM file (a provider's own CA). Parsed once; every new connection that names it gets
/// it by reference (castore.c).
typedef struct tb_ca_store tb_ca_store;

/// The system's authorities, with those of `extra_file` when it is not NULL. NULL when a file
/// cannot be read or holds no certificate, with `error` saying which and why.
tb_ca_store *tb_ca_store_create(const char *extra_file, char *error, size_t error_size);
/// Gives the store up: connections still open keep what they verify against.
void tb_ca_store_release(tb_ca_store *store);

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
    /// The loop had as many transfers running and waiting as it takes, or the transfer waited in
    /// its line past its timeout: not sent.
    TB_PROXY_BUSY = 6,
    /// The TLS handshake failed, or the server's certificate did not verify.
    TB_PROXY_TLS = 7,
};

/// What becomes of an answer's body, once its head has come (`on_head`).
enum tb_proxy_head {
    /// Held in the response, as without the callbacks.
    TB_HEAD_HOLD = 0,
    /// Passed to `on_body` as it arrives.
    TB_HEAD_STREAM = 1,
    /// Nobody will read it: the transfer stops now, its connection closed.
    TB_HEAD_STOP = 2,
};

/// What a body sink did with the bytes offered to it.
enum tb_proxy_body {
    /// Nobody reads any more, or not in time: the transfer stops.
    TB_BODY_STOP = 0,
    /// All of them taken.
    TB_BODY_TAKEN = 1,
    /// None of them, for want of room: the transfer pauses until tb_proxy_resume() is called with
    /// its tag (or its deadline passes), then offers them again.
    TB_BODY_FULL = 2,
};

typedef struct {
    int outcome;
    long status;
    /// The final answer's header lines ("Name: value\r\n"…, without the status line).
    char *headers;
    size_t headers_length;
    /// The answer's body.
    uint8_t *body;
    size_t body_length;
    /// libcurl's fixed description of a failure's code (never a URL, header or body).
    char error[256];
    /// The body went to `on_body`, not into `body`.
    int streamed;
    /// Connections the transfer opened: 0 when it reused one kept from an earlier transfer.
    long new_connections;
} tb_proxy_response;

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
    /// For the whole transfer, its wait in the loop's line included.
    long timeout_ms;
    long connect_timeout_ms;
    /// The transfer fails when nothing arrives for this long, rounded to seconds (0: no such
    /// bound; a paused transfer waits for its reader, not for the server).
    long silence_timeout_ms;
    size_t max_response_bytes;
    /// Connect to loopback and private addresses too (a provider that says so: tests, development).
    int allow_private_addresses;
    /// Allow plain http:// (else https only).
    int allow_http;
    /// Who may share connections: a transfer reuses only connections opened for transfers with
    /// the same key (and the same address policy and schemes). The API proxy gives the session's.
    /// At most 90 bytes: a longer key fails the transfer rather than being cut to match another.
    const char *connection_key;
    /// What its TLS connections are verified against; part of the connection key. NULL:
    /// libcurl's own configuration (its CA bundle, read for each new connection).
    const tb_ca_store *ca_store;
    /// Optional: called on the loop's thread once the answer's head is complete (a final status;
    /// `content_length` -1 when unknown): returns a tb_proxy_head. A streamed body is still
    /// counted against `max_response_bytes` (past it the transfer stops).
    int (*on_head)(void *context, long status, const char *headers, size_t headers_length, long long content_length);
    /// Offers body bytes when `on_head` chose to stream them: returns a tb_proxy_body. `tag` names
    /// the transfer to tb_proxy_resume().
    int (*on_body)(void *context, const uint8_t *data, size_t length, uint64_t tag);
    /// Called once on the loop's thread when the transfer has ended (whatever its outcome), unless
    /// tb_proxy_start() refused it; `response` is valid during the call only.
    void (*on_done)(void *context, const tb_proxy_response *response);
    void *context;
} tb_proxy_request;

/// A loop that runs at most `max_in_flight` transfers at once, with a line of as many more in
/// front of them, and its thread; NULL when either cannot be had.
tb_proxy_loop *tb_proxy_loop_create(int max_in_flight);

/// Ends the loop: transfers under way end as failed (their `on_done` is called), then its thread
/// frees it. Call once, when nothing will start a transfer on it any more.
void tb_proxy_loop_release(tb_proxy_loop *loop);

/// Starts `request` (copied: the caller's memory may go at once). Returns 1 when the loop took
/// it (`on_done` will be called), 0 when its line is full or memory ran out (it will not).
/// Connections are kept for reuse between transfers with the same `connection_key`, and only
/// after an answer libcurl framed exactly (never after a HEAD, a 1xx, 204 or 304, or a failure).
/// A 101 fails at once. A transfer fails (TB_PROXY_FAILED) when libcurl refuses an option.
int tb_proxy_start(tb_proxy_loop *loop, const tb_proxy_request *request);

/// Resumes the paused transfer `tag` of the loop `loop` (a tb_proxy_loop): its sink has room, or
/// will never have. Any thread; a transfer that has ended meanwhile is left alone. Shaped as a
/// body sink's waker, and called exactly once for each TB_BODY_FULL: each call gives back the hold
/// on the loop that TB_BODY_FULL took.
void tb_proxy_resume(void *loop, uint64_t tag);

/// What a loop's transfers did with connections, since it was made.
typedef struct {
    /// Connections opened (each a TCP handshake, and for https a TLS one).
    long long opened;
    /// Transfers answered on a connection kept from an earlier one.
    long long reused;
    /// Connections open now, kept for reuse or in use.
    long long open;
} tb_proxy_connections;

/// Any thread.
tb_proxy_connections tb_proxy_loop_connections(tb_proxy_loop *loop);

/// Whether the address policy refuses `address` (an IPv4 or IPv6 literal); -1 when it is not one.
int tb_proxy_address_refused(const char *address);

#endif
