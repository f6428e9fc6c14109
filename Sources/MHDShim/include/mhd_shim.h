// The whole boundary between Swift and libmicrohttpd.
//
// Swift cannot call MHD_start_daemon (variadic) and should not juggle MHD's request life cycle
// (the access handler runs several times per request; a connection may be suspended and resumed
// from another thread). This shim owns both and offers Swift a plain model instead:
//
//   1. The server calls `on_request` once per request, on a server thread, when the request is
//      complete (headers and body) or as soon as a limit is exceeded or its head is refused
//      (tb_limit). A request whose body passes `max_body_bytes` is answered before the rest of
//      the body is read, and its connection closed. A connection whose request arrives too
//      slowly (request_head_timeout_seconds, request_body_min_rate) is closed without a call.
//   2. Inside that call Swift either answers with tb_request_respond(), or calls
//      tb_request_defer() and answers later, from any thread, with tb_request_complete(): an
//      answer the shim has `build_answer` make into a response on the connection's server
//      thread, which sends it and frees it.
//   3. The shim frees the request when both libmicrohttpd and Swift are done with it.
//
// Every symbol starts with `tb_`. No libmicrohttpd type appears here.
#ifndef TB_MHD_SHIM_H
#define TB_MHD_SHIM_H

#include <stddef.h>
#include <stdint.h>

typedef struct tb_server tb_server;
typedef struct tb_request tb_request;
typedef struct tb_response tb_response;
typedef struct tb_stream tb_stream;

/// Why the shim hands a request to Swift before it is complete.
typedef enum {
    TB_LIMIT_NONE = 0,
    /// Content-Length or the received body exceeds `max_body_bytes`.
    TB_LIMIT_BODY = 1,
    /// The connection was not admitted by `on_connection_open` (total or per-client limit).
    TB_LIMIT_CONNECTIONS = 2,
    /// The head is malformed or frames the body ambiguously (RFC 9112): answer 400, which
    /// closes the connection; tb_request_problem() says why.
    TB_LIMIT_MALFORMED = 3,
    /// A Transfer-Encoding other than chunked: answer 501, which closes the connection;
    /// tb_request_problem() says why.
    TB_LIMIT_UNSUPPORTED = 4,
} tb_limit;

typedef struct {
    /// Called once per request; see the model above.
    void (*on_request)(void *context, tb_request *request);
    /// A connection opened from `client_ip` (text form). Return 1 to admit it, 0 to answer its
    /// requests with `TB_LIMIT_CONNECTIONS`, -1 to close it at once without an answer.
    int (*on_connection_open)(void *context, const char *client_ip);
    /// A connection that was admitted (`admitted` 1) or refused (0), not closed at once, closed.
    void (*on_connection_close)(void *context, const char *client_ip, int admitted);
    /// A message from libmicrohttpd itself (`from_library` 1: most are its word on a malformed
    /// request, which any client can send), or from the shim (0: its request watchdog); already
    /// formatted; it may come from any thread.
    void (*on_log)(void *context, const char *message, int from_library);
    /// Makes the response for an answer given to tb_request_complete(), on the server thread of
    /// the request's connection, and lets go of the answer (NULL: no response could be made; the
    /// connection closes). Called once per answer, unless the request ends first: then
    /// `drop_answer` is, on any thread.
    tb_response *(*build_answer)(void *context, void *answer);
    /// Lets go of an answer that will not be sent (its request ended first, however it ended).
    void (*drop_answer)(void *context, void *answer);
} tb_callbacks;

typedef struct {
    /// A listening socket from tb_listen().
    int listen_socket;
    /// Worker threads; 1 runs a single polling thread.
    unsigned int threads;
    /// Hard cap libmicrohttpd enforces by closing sockets (set above the admitted limit so that
    /// Swift can answer 503 first).
    unsigned int hard_connection_limit;
    /// Seconds a connection may stay idle before it is closed.
    unsigned int idle_timeout_seconds;
    /// Seconds a request head may take to arrive, counted from its first byte (before it, the
    /// connection is idle); a connection past it is closed without an answer. 0: none.
    unsigned int request_head_timeout_seconds;
    /// A body gets `request_head_timeout_seconds` from the end of its head, plus one second per
    /// this many bytes received; past that its connection is closed. 0: no deadline for bodies.
    size_t request_body_min_rate;
    /// Per-connection memory for the request line, headers and read buffer; libmicrohttpd answers
    /// 414 or 431 itself beyond it.
    size_t connection_memory_bytes;
    /// Largest request body accepted; larger ones are reported as TB_LIMIT_BODY.
    size_t max_body_bytes;
    /// PEM certificate chain and private key for HTTPS; both NULL for plain HTTP. Only read
    /// during tb_server_start().
    const char *tls_certificate_pem;
    const char *tls_key_pem;
} tb_server_options;

/// Opens a listening TCP socket on `host` (an IPv4 or IPv6 literal, without brackets) and
/// `port` (0 picks a free one), so that the caller knows the port before serving. Returns the
/// socket, or -1 with a message in `error`.
int tb_listen(const char *host, uint16_t port, uint16_t *bound_port, char *error, size_t error_size);

/// Closes a socket of tb_listen() that was never served.
void tb_close_socket(int socket);

/// Starts serving on the socket of tb_listen() (which it then owns). On failure returns NULL
/// and writes a message into `error`.
tb_server *tb_server_start(const tb_server_options *options, tb_callbacks callbacks,
                           void *context, char *error, size_t error_size);
/// Requests received and not yet completed (answered and sent, or abandoned).
int tb_server_active_requests(tb_server *server);
/// Stops accepting new connections; existing ones go on.
void tb_server_quiesce(tb_server *server);
/// Closes every connection and frees the server. No request may still be deferred.
void tb_server_stop(tb_server *server);

/// "GET", "POST", … (valid while the request lives).
const char *tb_request_method(const tb_request *request);
/// The request target as received, query string included; one in absolute form
/// ("http://host/path") as its origin form ("/path"), once its authority was checked against Host.
const char *tb_request_target(const tb_request *request);
/// A request header (case-insensitive name), or NULL. With the header given more than once:
/// the first.
const char *tb_request_header(const tb_request *request, const char *name);
/// Every value of a header (case-insensitive name), in the order received, joined by ", " into
/// `buffer` (NUL-terminated; cut short when it does not fit). Returns the joined length, which
/// is `size` or more when it was cut; 0 when the header is absent or empty.
size_t tb_request_header_joined(const tb_request *request, const char *name, char *buffer, size_t size);
/// The body received so far (all of it unless a limit was hit).
const uint8_t *tb_request_body(const tb_request *request, size_t *length);
/// Bytes of all request header names and values.
size_t tb_request_header_bytes(const tb_request *request);
/// Which limit, if any, made the shim call early.
tb_limit tb_request_limit(const tb_request *request);
/// With TB_LIMIT_MALFORMED or TB_LIMIT_UNSUPPORTED: a sentence saying what is wrong, which
/// quotes nothing of the request; NULL otherwise.
const char *tb_request_problem(const tb_request *request);
/// The client's address as text into `buffer`; returns 0 when unknown.
int tb_request_client_ip(const tb_request *request, char *buffer, size_t size);
/// CLOCK_MONOTONIC nanoseconds when the request line arrived.
uint64_t tb_request_start_ns(const tb_request *request);

/// A response with a copy of `body`.
tb_response *tb_response_create(unsigned int status, const void *body, size_t length);
/// The answer to a HEAD whose GET would have had a body of `length` bytes: announced in
/// Content-Length, never sent.
tb_response *tb_response_create_head(unsigned int status, uint64_t length);
/// Adds a header; returns 0 when libmicrohttpd refuses it (e.g. a newline in the value, a
/// header it writes itself such as Content-Length, or no memory left).
int tb_response_add_header(tb_response *response, const char *name, const char *value);
/// Asks libmicrohttpd to close the connection after this response; returns 0 when it could not
/// (no memory left).
int tb_response_close_connection(tb_response *response);
/// Frees a response that was never queued.
void tb_response_free(tb_response *response);

/// A body written while it is sent (stream.c), buffered up to `capacity` bytes. The producer
/// offers it bytes with tb_stream_offer() and ends it with tb_stream_finish(), from any thread;
/// the response made with tb_response_create_stream() sends it with chunked encoding.
tb_stream *tb_stream_create(size_t capacity);
/// A response whose body is `stream` (which the response then also holds).
tb_response *tb_response_create_stream(unsigned int status, tb_stream *stream);
/// Called once, from whichever thread made room (or ended the stream), for a producer that found
/// the buffer full.
typedef void (*tb_stream_waker)(void *context, uint64_t tag);
enum {
    /// Nobody will read them (the client went away, or the stream was ended), or they are more
    /// than the whole buffer holds: stop writing, and finish.
    TB_STREAM_CLOSED = 0,
    TB_STREAM_TAKEN = 1,
    /// No room for them yet: `wake(context, tag)` is called once there is room for them, or once
    /// nobody will read them; offer them again then.
    TB_STREAM_FULL = 2,
};
/// Appends all `length` bytes, or none of them; never waits. Returns one of TB_STREAM_*.
int tb_stream_offer(tb_stream *stream, const void *data, size_t length, tb_stream_waker wake, void *context, uint64_t tag);
/// Ends the body: `ok` 1 ends it properly, 0 breaks it off (the connection is closed, so that a
/// client never takes a cut body for a whole one). The producer's last call.
void tb_stream_finish(tb_stream *stream, int ok);
/// Gives up a stream whose response was never made (the response's hold on it).
void tb_stream_abandon(tb_stream *stream);
/// Called once libmicrohttpd is done with the stream's response (sent, broken off, or never
/// sent), with the body bytes it took, on the thread that let go of the response.
typedef void (*tb_stream_ended)(void *context, uint64_t sent);
/// Sets the stream's `ended` call, at most once, before its response is made.
void tb_stream_when_ended(tb_stream *stream, tb_stream_ended ended, void *context);

/// Answers now; only inside `on_request`. Takes ownership of `response`. Returns 0 on failure
/// (including a NULL response), after which the connection is closed.
int tb_request_respond(tb_request *request, tb_response *response);
/// Inside `on_request`: the answer will come later through tb_request_complete().
void tb_request_defer(tb_request *request);
/// Answers a deferred request, from any thread: `answer` (the caller's own) is made into a
/// response by `build_answer` on the connection's server thread, so that the response is made,
/// sent and freed by one thread; or given back through `drop_answer`. NULL closes the
/// connection without an answer.
void tb_request_complete(tb_request *request, void *answer);

/// CLOCK_MONOTONIC in nanoseconds.
uint64_t tb_monotonic_ns(void);

#endif
