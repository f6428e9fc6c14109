// What the shim's files share: its structures and internal functions. Not part of the boundary
// (include/mhd_shim.h is).
//
// The locks, declared here, and their order: a lock on the left may be held while the one on its
// right is taken, never the other way round.
//
//   libmicrohttpd's response mutex -> tb_stream.lock -> libmicrohttpd's cleanup_connection_mutex
//   tb_stream_list.lock -> tb_stream.lock -> cleanup_connection_mutex
//   tb_request.lock -> cleanup_connection_mutex
//   tb_watchdog.lock (nothing else is taken while it is held)
//   libmicrohttpd's response mutex, tb_stream_list.lock -> a stream producer's waker
//
// libmicrohttpd holds a streamed response's mutex while it calls the content reader
// (read_stream, connection.c), which takes the stream's lock. MHD_suspend_connection and
// MHD_resume_connection, which take the daemon's (or its worker's) cleanup_connection_mutex,
// are called with a shim lock held: the request's in tb_dispatch (suspend; tb_request_complete
// resumes after unlocking, once it has seen under that lock the flag set after the suspend, so
// that the woken thread does not wait for the lock), and the stream's in read_stream (suspend)
// and wake_reader (resume), so that a resume cannot overtake the suspend it undoes. That is safe
// because cleanup_connection_mutex is innermost: libmicrohttpd 0.9.75 calls none of the shim's
// callbacks while holding it (daemon.c: MHD_cleanup_connections drops it around the
// NOTIFY_CONNECTION callback; response.c: MHD_destroy_response calls the response's free callback,
// free_stream, after dropping the response's mutex), and the shim calls nothing else of
// libmicrohttpd with one of its locks held. free_stream takes the list's lock and the stream's one
// after the other, never one inside the other. A stream's waker (tb_stream_offer) is called with
// the stream's lock dropped, but from read_stream inside libmicrohttpd's response mutex and from
// tb_streams_end inside the list's lock: a waker takes only a lock of its own that is innermost
// (the API proxy's loop lock, CurlShim's curl_internal.h). The Swift callbacks run with no shim
// lock held.
#ifndef TB_SHIM_INTERNAL_H
#define TB_SHIM_INTERNAL_H

#include "mhd_shim.h"

#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>

typedef struct tb_connection tb_connection;

// Deadlines for receiving requests (watchdog.c): libmicrohttpd 0.9.75 only closes a connection
// that goes completely silent, so a thread of the shim closes those whose request arrives too
// slowly. It shuts their sockets down (shutdown(), never close(): libmicrohttpd owns them) and
// libmicrohttpd, reading the end of the stream, closes them itself.
typedef struct {
    uint64_t head_ns;         // for a request head (0: no deadlines at all)
    uint64_t body_min_rate;   // bytes per second a body must keep up (0: no deadline for bodies)
    pthread_mutex_t lock;     // guards `connections` and `stopping`
    pthread_cond_t wake;
    tb_connection *connections; // every open connection, linked through `next`/`previous`
    int stopping;
    int running;              // the thread was started
    pthread_t thread;
} tb_watchdog;

// The streamed answers libmicrohttpd holds for one server's connections (stream.c), so that
// stopping the server can end them first: libmicrohttpd aborts when stopped with a suspended
// connection.
typedef struct {
    pthread_mutex_t lock; // guards `head` and `count`
    pthread_cond_t changed;
    tb_stream *head;      // linked through tb_stream's `next`/`previous`
    int count;
    int ending;           // tb_streams_end() has begun: a stream attached from now on is ended at once
} tb_stream_list;

struct tb_server {
    struct MHD_Daemon *daemon;
    tb_callbacks callbacks;
    void *context;
    size_t max_body_bytes;
    int active_requests; // atomic: requests between arrival and completion
    int resuming;        // atomic: tb_request_complete() calls inside MHD_resume_connection()
    tb_watchdog watchdog;
    tb_stream_list streams;
};

struct tb_response {
    struct MHD_Response *mhd;
    unsigned int status;
    const uint8_t *body; // owned by `mhd`; kept for tb_answer_directly()
    size_t length;
    tb_stream *stream;   // a streamed body (stream.c), or NULL
};

// stream.c: a streamed response about to be queued learns its connection (to suspend and resume
// it) and joins its server's list.
void tb_stream_attach(tb_stream *stream, tb_server *server, struct MHD_Connection *connection);
// The server's list of streams, made before its daemon starts and freed after it stops.
void tb_stream_list_init(tb_stream_list *list);
void tb_stream_list_destroy(tb_stream_list *list);
// At the server's stop: breaks off every stream of its list still open and waits up to
// `wait_ms` for their connections to let go.
void tb_streams_end(tb_server *server, unsigned int wait_ms);

// One per connection (libmicrohttpd's socket context): whether it was admitted, and the request
// whose completion libmicrohttpd has not reported yet. libmicrohttpd 0.9.75 can drop a request
// without NOTIFY_COMPLETED (a second protocol error in one request, e.g. a 431 for cookies that
// do not fit followed by a malformed Content-Length), but it always reports the connection's
// close; the request is released there then.
struct tb_connection {
    int admitted;
    struct tb_request *open_request;
    char client_ip[INET6_ADDRSTRLEN]; // text, formatted once per connection
    // The watchdog's: the socket, and by when the request now arriving must be in.
    int fd;                   // -1 when libmicrohttpd did not say: then not watched
    uint64_t deadline_ns;     // atomic; 0: none (idle, the request is with Swift, or no deadlines)
    int answered;             // atomic; answered directly: its cut ends the drain, and is not logged
    // Atomic; while the connection idles (no byte of a next request yet: no deadline but the
    // idle timeout), the number of this idle period (from 1, counted by its server thread); 0
    // otherwise.
    uint32_t idle;
    uint32_t idle_periods;    // the server thread's count of idle periods
    uint64_t idle_since_ns;   // atomic; when the idle period began (written before `idle`)
    // The watchdog's own, under its lock: the idle period it last looked at, and the socket's
    // bytes received at that look.
    uint32_t seen_period;
    uint64_t seen_bytes;
    uint64_t body_started_ns; // when the request's head was complete
    uint64_t body_bytes;      // of the request's body so far
    tb_connection *previous;  // in tb_watchdog.connections, under its lock
    tb_connection *next;
};

struct tb_request {
    struct MHD_Connection *connection;
    tb_server *server; // whose connection it came on
    tb_connection *owner;
    char client_ip[INET6_ADDRSTRLEN];
    const char *method;
    uint8_t *body;
    size_t body_length;
    size_t body_capacity;
    size_t header_bytes;
    uint64_t start_ns;
    tb_limit limit;
    const char *problem; // with TB_LIMIT_MALFORMED or TB_LIMIT_UNSUPPORTED: why (framing.c)
    const char *raw_target; // where libmicrohttpd holds the target (valid during the head)
    size_t target_length;
    int started;    // the access handler has seen this request
    int dispatched; // on_request has been called
    int responded;  // a response is queued or pending
    int direct;     // libmicrohttpd takes no response now: tb_answer_directly() sends it
    size_t drained; // bytes of the body read and dropped after a direct answer
    // Guarded by `lock`: the deferred path crosses threads.
    pthread_mutex_t lock;
    int references; // libmicrohttpd's, plus Swift's while deferred
    int deferred;
    int suspended;
    int completed; // tb_request_complete() has run
    void *pending; // the answer given to tb_request_complete(), not yet built
    char target[]; // NUL-terminated: one allocation for the request and its target
};

/// Drops one reference to `request`; the last frees it.
void tb_request_release(tb_request *request);
/// Returns once no tb_request_complete() call is inside MHD_resume_connection(): the request it
/// resumes may already have ended, and the daemon must outlive the call.
void tb_wait_for_resumes(tb_server *server);
/// Queues `response` on the request's connection and frees it.
enum MHD_Result tb_queue(tb_request *request, tb_response *response);
/// Builds the pending answer (on the connection's server thread) and queues it; MHD_NO, which
/// closes the connection, without one.
enum MHD_Result tb_queue_pending(tb_request *request, void *answer);

/// Checks the request's head for what libmicrohttpd 0.9.75 lets through (framing.c) and sets
/// `request->header_bytes`, in one walk over the headers; on the first call of the access
/// handler. Returns TB_LIMIT_NONE, or TB_LIMIT_MALFORMED or TB_LIMIT_UNSUPPORTED with
/// `request->problem` set.
tb_limit tb_check_framing(tb_request *request, const char *method, const char *version);

/// Writes `response` to the request's socket itself, with `Connection: close`, and frees it
/// (direct.c): for a request libmicrohttpd no longer takes a response for. Returns 1 when it
/// was sent; the caller then has libmicrohttpd close the connection.
int tb_answer_directly(tb_request *request, tb_response *response);
// After a direct answer, how long the client has to read it while what it still sends is read
// and dropped (a lingering close), and how much of that is read at most: a client still sending
// when the socket closes gets a reset, which can discard the answer it has not read yet; given a
// moment, it reads the answer and stops sending (curl does).
#define TB_DRAIN_NS 200000000u
#define TB_DRAIN_BYTES (4u << 20)
// More query parameters than this in a request target are answered 414 by tb_refuse_target():
// libmicrohttpd keeps each in a record of the connection's memory pool (about 64 bytes), and
// past its room it fails the request without an answer, leaving the connection open.
#define TB_MAX_QUERY_PARAMETERS 256
// Answers 414 to the request on `connection` before libmicrohttpd parses its target, straight
// to the socket, and ends the sending side; 0 when it could not be sent. It does not wait for the
// client (this runs on a server thread): the caller has the connection cut after TB_DRAIN_NS.
int tb_refuse_target(struct MHD_Connection *connection);

/// The watchdog (watchdog.c). Started before the daemon; stopped after it.
int tb_watchdog_start(tb_server *server, unsigned int head_seconds, size_t body_min_rate,
                      char *error, size_t error_size);
void tb_watchdog_stop(tb_server *server);
/// A connection opened: it idles until its first request's first byte, whose head is then due
/// within the head timeout.
void tb_watch_open(tb_server *server, tb_connection *connection, int fd);
/// A connection closes; before libmicrohttpd closes its socket.
void tb_watch_close(tb_server *server, tb_connection *connection);
/// The previous request is done: the connection idles until its next request's first byte.
void tb_watch_idle(tb_server *server, tb_connection *connection);
/// The request's head is in; its body (if any) now arrives.
void tb_watch_body(tb_server *server, tb_connection *connection);
/// `bytes` more of the body arrived.
void tb_watch_body_bytes(tb_server *server, tb_connection *connection, size_t bytes);
/// The request is with Swift: no deadline until it is done.
void tb_watch_dispatched(tb_connection *connection);
// The connection is to be cut at the watchdog's first round after `delay_ns` (within a second
// more): it was answered directly, and its client is to read the answer meanwhile.
void tb_watch_cut_after(tb_server *server, tb_connection *connection, uint64_t delay_ns);

#endif
