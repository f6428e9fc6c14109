// The watchdog: deadlines for receiving a request (shim_internal.h, tb_watchdog).
//
// libmicrohttpd 0.9.75 has an idle timeout only, which any trickle of bytes resets. So each
// connection carries a deadline, set on the server threads as its request goes through its
// phases, and one thread per server checks them about once a second:
//   - idle (opened, or its previous request ended) and no byte of a next request yet: none; the
//     idle timeout (libmicrohttpd's) closes it, quietly, as keep-alive connections are meant to
//     be closed (a browser opens connections ahead of its requests) — but for a connection
//     refused (over the connection limits), whose request only gets a 503: `head_ns` from its
//     opening, so that silent refused connections cannot hold libmicrohttpd's own limit;
//   - receiving a head, since its first byte arrived: `head_ns`. libmicrohttpd does not say
//     when that is, but the socket does (TCP_INFO), and the watchdog asks it on its rounds —
//     never the server threads, for whom a system call per request was a twentieth of a `GET
//     /token`. At its first look at an idle period, a byte received since the period began (the
//     time of the last one received, tcpi_last_data_recv, more than `tb_idle_margin_ns` after
//     it began: the kernel counts in jiffies) means the next request has begun; otherwise the
//     count of bytes received (tcpi_bytes_received) is noted, and any byte beyond it at a later
//     round means it has. A fresh connection's count starts at 0. So the head deadline starts
//     within a second of the first byte — of the second one when the first came within the
//     margin after the previous answer and nothing followed for a round;
//   - receiving a body, since the head was complete: `head_ns` plus one second per
//     `body_min_rate` bytes received (Apache's mod_reqtimeout MinRate);
//   - with Swift (dispatched) until the request is done: none.
//   - answered directly (direct.c) and draining: TB_DRAIN_NS from the answer.
// A connection past its deadline gets shutdown(SHUT_RDWR): libmicrohttpd then reads the end of
// the stream and closes the connection itself, reporting it as usual. Only those are logged: a
// client whose request did not arrive in time (not the end of a drain).
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
// How much later than an idle period's start the last byte received must be to count as after
// it: the kernel's time of it is in jiffies (1 to 10 ms).
static const uint64_t tb_idle_margin_ns = 20000000u;

static void tb_set_deadline(tb_connection *connection, uint64_t deadline) {
    __atomic_store_n(&connection->deadline_ns, deadline, __ATOMIC_RELAXED);
}

// The socket's bytes received so far and how long ago (ns) the last one came; 0 when the kernel
// does not say (then any connection counts as having received some, and gets the head deadline).
static int tb_received(int fd, uint64_t *bytes, uint64_t *ago_ns) {
    struct tcp_info info;
    socklen_t length = sizeof info;
    memset(&info, 0, sizeof info);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0 ||
        length < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received) {
        return 0;
    }
    *bytes = info.tcpi_bytes_received;
    *ago_ns = (uint64_t)info.tcpi_last_data_recv * 1000000u;
    return 1;
}

// An idle connection whose next request has begun to arrive gets the head deadline. Under `lock`.
static void tb_notice_head(tb_watchdog *watchdog, tb_connection *connection, uint64_t now) {
    uint32_t period = __atomic_load_n(&connection->idle, __ATOMIC_ACQUIRE);
    if (period == 0) return;
    uint64_t bytes = 0, ago_ns = 0;
    if (tb_received(connection->fd, &bytes, &ago_ns)) {
        if (connection->seen_period != period) {
            // The first look at this idle period (read after `idle`: this period's start or a
            // later one's, which only makes the test stricter).
            uint64_t since = __atomic_load_n(&connection->idle_since_ns, __ATOMIC_RELAXED);
            if (ago_ns >= now || now - ago_ns <= since + tb_idle_margin_ns) {
                connection->seen_period = period;
                connection->seen_bytes = bytes;
                return;
            }
        } else if (bytes <= connection->seen_bytes) {
            return;
        }
    }
    // Unless a server thread moved on meanwhile (the head is in: it set a deadline of its own;
    // or a new idle period began).
    if (!__atomic_compare_exchange_n(&connection->idle, &period, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) return;
    uint64_t none = 0;
    __atomic_compare_exchange_n(&connection->deadline_ns, &none, now + watchdog->head_ns, 0,
                                __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

// Starts head deadlines where a request began, and shuts down the connections past their
// deadline; returns how many, but for those answered directly (whose cut is the end of their
// drain, not a client too slow). Under `lock`.
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
        if (!__atomic_load_n(&connection->answered, __ATOMIC_RELAXED)) cut += 1;
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
                     "request watchdog: closed %u connection(s) whose request did not arrive in time "
                     "(request_head_timeout_seconds, request_body_min_bytes_per_second)",
                     cut);
            server->callbacks.on_log(server->context, message, 0);
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

// The connection idles from now: no deadline until a byte of its next request arrives.
static void tb_idle(tb_connection *connection) {
    connection->idle_periods += connection->idle_periods == UINT32_MAX ? 2 : 1; // never 0
    __atomic_store_n(&connection->idle_since_ns, tb_monotonic_ns(), __ATOMIC_RELAXED);
    tb_set_deadline(connection, 0);
    __atomic_store_n(&connection->idle, connection->idle_periods, __ATOMIC_RELEASE);
}

void tb_watch_open(tb_server *server, tb_connection *connection, int fd) {
    tb_watchdog *watchdog = &server->watchdog;
    connection->fd = fd;
    if (watchdog->head_ns == 0 || fd < 0) return;
    tb_idle(connection);
    if (!connection->admitted) {
        // Its request, which gets a 503, is due from now (the idle period above only numbers
        // its bytes).
        __atomic_store_n(&connection->idle, 0u, __ATOMIC_RELEASE);
        tb_set_deadline(connection, tb_monotonic_ns() + watchdog->head_ns);
    }
    pthread_mutex_lock(&watchdog->lock);
    // Fresh: every byte it receives is of its first request.
    connection->seen_period = connection->idle_periods;
    connection->seen_bytes = 0;
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
    tb_idle(connection);
}

void tb_watch_body(tb_server *server, tb_connection *connection) {
    const tb_watchdog *watchdog = &server->watchdog;
    if (watchdog->head_ns == 0) return;
    __atomic_store_n(&connection->idle, 0u, __ATOMIC_RELEASE);
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

void tb_watch_cut_after(tb_server *server, tb_connection *connection, uint64_t delay_ns) {
    if (server->watchdog.head_ns == 0 || connection->fd < 0) return;
    __atomic_store_n(&connection->answered, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&connection->idle, 0u, __ATOMIC_RELEASE);
    tb_set_deadline(connection, tb_monotonic_ns() + delay_ns);
}

void tb_watch_dispatched(tb_connection *connection) {
    __atomic_store_n(&connection->idle, 0u, __ATOMIC_RELEASE);
    tb_set_deadline(connection, 0);
}
