// The watchdog: deadlines for receiving a request (shim_internal.h, tb_watchdog).
//
// libmicrohttpd 0.9.75 has an idle timeout only, which any trickle of bytes resets. So each
// connection carries a deadline, set on the server threads as its request goes through its
// phases, and one thread per server checks them about once a second:
//   - idle (opened, or its previous request ended) and no byte of a next request yet: none; the
//     idle timeout (libmicrohttpd's) closes it, quietly, as keep-alive connections are meant to
//     be closed;
//   - receiving a head, since its first byte arrived: `head_ns`. libmicrohttpd does not say
//     when that is, but the socket does: the watchdog compares the kernel's count of bytes
//     received (TCP_INFO's tcpi_bytes_received) with the count when the connection began to
//     idle, so the head deadline starts within a second of the first byte;
//   - receiving a body, since the head was complete: `head_ns` plus one second per
//     `body_min_rate` bytes received (Apache's mod_reqtimeout MinRate);
//   - with Swift (dispatched) until the request is done: none.
// A connection past its deadline gets shutdown(SHUT_RDWR): libmicrohttpd then reads the end of
// the stream and closes the connection itself, reporting it as usual. Only those are logged: a
// client that was sending, too slowly.
//
// The socket cannot have been closed (and its number reused) when the watchdog shuts it down:
// the watchdog holds `lock` while it walks the connections, tb_watch_close() takes it to
// remove a connection, and libmicrohttpd closes a socket only after its NOTIFY_CONNECTION
// CLOSED callback returned (daemon.c, MHD_cleanup_connections and new_connection_process_).
#include "shim_internal.h"

#include <linux/tcp.h> // struct tcp_info with tcpi_bytes_received (glibc's <netinet/tcp.h> lacks it)
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static const uint64_t tb_second_ns = 1000000000u;

static void tb_set_deadline(tb_connection *connection, uint64_t deadline) {
    __atomic_store_n(&connection->deadline_ns, deadline, __ATOMIC_RELAXED);
}

// The bytes the socket has received so far; UINT64_MAX when the kernel does not say (then any
// connection counts as having received some, and gets the head deadline at once).
static uint64_t tb_bytes_received(int fd) {
    struct tcp_info info;
    socklen_t length = sizeof info;
    memset(&info, 0, sizeof info);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0 ||
        length < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received) {
        return UINT64_MAX;
    }
    return info.tcpi_bytes_received;
}

// An idle connection whose next request has begun to arrive gets the head deadline. Under `lock`.
static void tb_notice_head(tb_watchdog *watchdog, tb_connection *connection, uint64_t now) {
    if (!__atomic_load_n(&connection->idle, __ATOMIC_ACQUIRE)) return;
    if (tb_bytes_received(connection->fd) <= connection->idle_bytes) return;
    // Unless a server thread moved on meanwhile (the head is in: it set a deadline of its own).
    int idle = 1;
    if (!__atomic_compare_exchange_n(&connection->idle, &idle, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) return;
    uint64_t none = 0;
    __atomic_compare_exchange_n(&connection->deadline_ns, &none, now + watchdog->head_ns, 0,
                                __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

// Starts head deadlines where a request began, and shuts down the connections past their
// deadline; returns how many. Under `lock`.
static unsigned int tb_cut_late(tb_watchdog *watchdog, uint64_t now) {
    unsigned int cut = 0;
    for (tb_connection *connection = watchdog->connections; connection != NULL;
         connection = connection->next) {
        tb_notice_head(watchdog, connection, now);
        uint64_t deadline = __atomic_load_n(&connection->deadline_ns, __ATOMIC_RELAXED);
        if (deadline == 0 || now < deadline) continue;
        // Only once, unless a server thread moved the deadline meanwhile.
        if (!__atomic_compare_exchange_n(&connection->deadline_ns, &deadline, 0, 0,
                                         __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            continue;
        }
        shutdown(connection->fd, SHUT_RDWR);
        cut += 1;
    }
    return cut;
}

static void *tb_watchdog_run(void *argument) {
    tb_server *server = argument;
    tb_watchdog *watchdog = &server->watchdog;
    pthread_mutex_lock(&watchdog->lock);
    while (!watchdog->stopping) {
        unsigned int cut = tb_cut_late(watchdog, tb_monotonic_ns());
        if (cut > 0) {
            // Logged outside the lock, so that opening and closing connections never wait on it.
            pthread_mutex_unlock(&watchdog->lock);
            char message[160];
            snprintf(message, sizeof message,
                     "request watchdog: closed %u connection(s) whose request arrived too slowly "
                     "(request_head_timeout_seconds, request_body_min_bytes_per_second)",
                     cut);
            server->callbacks.on_log(server->context, message);
            pthread_mutex_lock(&watchdog->lock);
            if (watchdog->stopping) break;
        }
        struct timespec wake;
        clock_gettime(CLOCK_MONOTONIC, &wake);
        wake.tv_sec += 1;
        pthread_cond_timedwait(&watchdog->wake, &watchdog->lock, &wake);
    }
    pthread_mutex_unlock(&watchdog->lock);
    return NULL;
}

int tb_watchdog_start(tb_server *server, unsigned int head_seconds, size_t body_min_rate,
                      char *error, size_t error_size) {
    tb_watchdog *watchdog = &server->watchdog;
    watchdog->head_ns = (uint64_t)head_seconds * tb_second_ns;
    watchdog->body_min_rate = body_min_rate;
    pthread_mutex_init(&watchdog->lock, NULL);
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&watchdog->wake, &attributes);
    pthread_condattr_destroy(&attributes);
    if (watchdog->head_ns == 0) return 1;
    int failed = pthread_create(&watchdog->thread, NULL, tb_watchdog_run, server);
    if (failed != 0) {
        snprintf(error, error_size, "cannot start the request watchdog: %s", strerror(failed));
        pthread_cond_destroy(&watchdog->wake);
        pthread_mutex_destroy(&watchdog->lock);
        return 0;
    }
    watchdog->running = 1;
    return 1;
}

void tb_watchdog_stop(tb_server *server) {
    tb_watchdog *watchdog = &server->watchdog;
    if (watchdog->running) {
        pthread_mutex_lock(&watchdog->lock);
        watchdog->stopping = 1;
        pthread_cond_signal(&watchdog->wake);
        pthread_mutex_unlock(&watchdog->lock);
        pthread_join(watchdog->thread, NULL);
        watchdog->running = 0;
    }
    pthread_cond_destroy(&watchdog->wake);
    pthread_mutex_destroy(&watchdog->lock);
}

// The connection idles from now: no deadline until a byte beyond `bytes` arrives.
static void tb_idle(tb_connection *connection, uint64_t bytes) {
    connection->idle_bytes = bytes;
    tb_set_deadline(connection, 0);
    __atomic_store_n(&connection->idle, 1, __ATOMIC_RELEASE);
}

void tb_watch_open(tb_server *server, tb_connection *connection, int fd) {
    tb_watchdog *watchdog = &server->watchdog;
    connection->fd = fd;
    if (watchdog->head_ns == 0 || fd < 0) return;
    tb_idle(connection, 0);
    pthread_mutex_lock(&watchdog->lock);
    connection->previous = NULL;
    connection->next = watchdog->connections;
    if (watchdog->connections != NULL) watchdog->connections->previous = connection;
    watchdog->connections = connection;
    pthread_mutex_unlock(&watchdog->lock);
}

void tb_watch_close(tb_server *server, tb_connection *connection) {
    tb_watchdog *watchdog = &server->watchdog;
    if (watchdog->head_ns == 0 || connection->fd < 0) return;
    pthread_mutex_lock(&watchdog->lock);
    if (connection->previous != NULL) {
        connection->previous->next = connection->next;
    } else {
        watchdog->connections = connection->next;
    }
    if (connection->next != NULL) connection->next->previous = connection->previous;
    pthread_mutex_unlock(&watchdog->lock);
}

void tb_watch_idle(tb_server *server, tb_connection *connection) {
    if (server->watchdog.head_ns == 0 || connection->fd < 0) return;
    // Bytes of a pipelined next request already received count as before it: its head then
    // gets its deadline at its next byte, or the idle timeout bounds it.
    uint64_t bytes = tb_bytes_received(connection->fd);
    tb_idle(connection, bytes == UINT64_MAX ? 0 : bytes);
}

void tb_watch_body(tb_server *server, tb_connection *connection) {
    const tb_watchdog *watchdog = &server->watchdog;
    if (watchdog->head_ns == 0) return;
    __atomic_store_n(&connection->idle, 0, __ATOMIC_RELEASE);
    connection->body_started_ns = tb_monotonic_ns();
    connection->body_bytes = 0;
    tb_set_deadline(connection, watchdog->body_min_rate == 0
                                    ? 0
                                    : connection->body_started_ns + watchdog->head_ns);
}

void tb_watch_body_bytes(tb_server *server, tb_connection *connection, size_t bytes) {
    const tb_watchdog *watchdog = &server->watchdog;
    if (watchdog->head_ns == 0 || watchdog->body_min_rate == 0) return;
    connection->body_bytes += bytes;
    // The body limit keeps body_bytes far below where this product could overflow.
    uint64_t earned = connection->body_bytes * tb_second_ns / watchdog->body_min_rate;
    tb_set_deadline(connection, connection->body_started_ns + watchdog->head_ns + earned);
}

void tb_watch_dispatched(tb_connection *connection) {
    __atomic_store_n(&connection->idle, 0, __ATOMIC_RELEASE);
    tb_set_deadline(connection, 0);
}
