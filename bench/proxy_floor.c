/* The floor of a libmicrohttpd + libcurl proxy, for the benchmark (bench/run.py): what proxying a
 * GET to an upstream costs with these two libraries and nothing else (no session, no header
 * rules, no log, no metrics), in two designs, so that a run shows how far the broker's API proxy
 * is above its own design's floor, and what the other design would give.
 *
 *   proxy_floor split|one PORT THREADS UPSTREAM_URL [SESSIONS]
 *
 * split: the broker's design — libmicrohttpd's thread pool (THREADS server threads) hands each
 *        request to one thread running libcurl's multi interface (a queue under a lock, and
 *        curl_multi_wakeup), which resumes the suspended connection with the answer.
 * one:   THREADS threads, each with its own libmicrohttpd daemon (external epoll, all on one
 *        listening socket) and its own libcurl multi, waiting in one curl_multi_poll on both:
 *        a request is carried end to end by the thread that read it.
 *
 * With SESSIONS (split only), each transfer's handle is first reset and given the options the broker
 * sets (transfer.c) and its check of a reused connection (one peek at its socket before the request
 * goes out); each answer carries the headers the broker's carries (the same bytes on the wire, for
 * libmicrohttpd to copy and send); and with SESSIONS above 0 the handle gets a connection cache (a libcurl share holding
 * connections, TLS sessions and DNS answers, as keys.c's) of one of SESSIONS keys taken at random, each
 * keeping up to 128 connections (the broker's: proxy_max_transfers). `make bench` runs it with SESSIONS 1: one pool
 * every request shares, as the broker keeps one pool per API (`api_connections: shared`, its default) —
 * the floor of the broker's proxy as it is configured, not only of its design. SESSIONS = the proxy's
 * sessions by hand gives the floor of `api_connections: per_session` (each session's connections
 * apart); SESSIONS 0 separates the options' cost from the share's.
 *
 * Every request is answered with UPSTREAM_URL's body (200, Content-Type: application/json), or
 * 502 when the transfer fails. Upstream connections are kept by each multi handle. Runs until
 * SIGTERM or SIGINT. Prints "listening PORT" once it accepts connections.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <curl/curl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { MAX_THREADS = 64, KEPT_HANDLES = 256 };

typedef struct loop loop;

typedef struct request {
    struct MHD_Connection *connection;
    loop *loop;
    char *body;
    size_t length, capacity;
    int started, done, failed;
    curl_socket_t opened; /* with SESSIONS: the socket this transfer opened, if any */
    struct request *next;
} request;

/* A libcurl multi handle and the thread that drives it; `waiting` is for the split design. */
struct loop {
    CURLM *multi;
    struct MHD_Daemon *daemon; /* one: this thread's daemon */
    pthread_mutex_t lock;
    request *waiting, *waiting_tail; /* split: handed over, oldest first */
    int polling;                     /* split: the thread sleeps (or is about to) in curl_multi_poll */
    CURL *kept[KEPT_HANDLES];
    int kept_count;
    pthread_t thread;
};

static const char *upstream;
static int one_thread;
static int broker_options = 0; /* SESSIONS given */
static int session_count = 0;  /* SESSIONS */
static CURLSH **sessions;
static loop loops[MAX_THREADS];
static loop shared_loop; /* split */

static size_t on_data(char *data, size_t size, size_t count, void *context) {
    request *r = context;
    size_t length = size * count;
    if (r->length + length > r->capacity) {
        size_t capacity = (r->length + length) * 2;
        char *grown = realloc(r->body, capacity);
        if (!grown) return 0;
        r->body = grown;
        r->capacity = capacity;
    }
    memcpy(r->body + r->length, data, length);
    r->length += length;
    return length;
}

static curl_socket_t on_open_socket(void *context, curlsocktype purpose, struct curl_sockaddr *address) {
    (void)purpose;
    request *r = context;
    r->opened = socket(address->family, address->socktype, address->protocol);
    return r->opened;
}

/* The broker's check of a kept connection (its transfer.c, on_prerequest): the socket of a new one
 * noted by its local port; a reused one peeked at, and given up when bytes wait on it. */
static curl_socket_t by_port[65536];

static int on_prerequest(void *context, char *remote, char *local, int remote_port, int local_port) {
    (void)remote, (void)local, (void)remote_port;
    request *r = context;
    if (local_port <= 0 || local_port > 65535) return CURL_PREREQFUNC_OK;
    if (r->opened != CURL_SOCKET_BAD) {
        by_port[local_port] = r->opened;
        return CURL_PREREQFUNC_OK;
    }
    char byte;
    ssize_t peeked = recv(by_port[local_port], &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return peeked < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? CURL_PREREQFUNC_OK : CURL_PREREQFUNC_ABORT;
}

static size_t on_header(char *data, size_t size, size_t count, void *context) {
    (void)data; (void)context;
    return size * count;
}

/* The handle as the broker prepares it: reset, then its options (transfer.c), then a session's
 * connections. A header list like the benchmark's proxied GET's (wrk sends no header the proxy
 * passes on): the token, no Expect. */
static struct curl_slist *broker_headers;

static int as_the_broker(CURL *easy, request *r) {
    curl_easy_setopt(easy, CURLOPT_SHARE, NULL);
    curl_easy_reset(easy);
    r->opened = CURL_SOCKET_BAD;
    return curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK &&
           curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK &&
           curl_easy_setopt(easy, CURLOPT_PROXY, "") == CURLE_OK &&
           curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
           curl_easy_setopt(easy, CURLOPT_QUICK_EXIT, 1L) == CURLE_OK &&
           curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 10000L) == CURLE_OK &&
           curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, 5000L) == CURLE_OK &&
           curl_easy_setopt(easy, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)10 << 20) == CURLE_OK &&
           curl_easy_setopt(easy, CURLOPT_USERAGENT, "token-broker") == CURLE_OK &&
           curl_easy_setopt(easy, CURLOPT_HTTPHEADER, broker_headers) == CURLE_OK &&
           curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, on_open_socket) == CURLE_OK &&
           curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, r) == CURLE_OK &&
           curl_easy_setopt(easy, CURLOPT_PREREQFUNCTION, on_prerequest) == CURLE_OK &&
           curl_easy_setopt(easy, CURLOPT_PREREQDATA, r) == CURLE_OK &&
           curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header) == CURLE_OK &&
           curl_easy_setopt(easy, CURLOPT_MAXAGE_CONN, 55L) == CURLE_OK &&
           (session_count == 0 || curl_easy_setopt(easy, CURLOPT_SHARE, sessions[rand() % session_count]) == CURLE_OK);
}

static void start_transfer(loop *l, request *r) {
    CURL *easy = l->kept_count > 0 ? l->kept[--l->kept_count] : curl_easy_init();
    if (!easy || (broker_options && !as_the_broker(easy, r)) || curl_easy_setopt(easy, CURLOPT_URL, upstream) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_data) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_WRITEDATA, r) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_PRIVATE, r) != CURLE_OK ||
        curl_multi_add_handle(l->multi, easy) != CURLM_OK) {
        if (easy) curl_easy_cleanup(easy);
        r->failed = r->done = 1;
        MHD_resume_connection(r->connection);
    }
}

/* Each finished transfer: its handle kept for the next, its connection resumed. */
static void finish_transfers(loop *l) {
    CURLMsg *message;
    int left;
    while ((message = curl_multi_info_read(l->multi, &left))) {
        if (message->msg != CURLMSG_DONE) continue;
        request *r;
        curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, (char **)&r);
        r->failed = message->data.result != CURLE_OK;
        curl_multi_remove_handle(l->multi, message->easy_handle);
        if (l->kept_count < KEPT_HANDLES) l->kept[l->kept_count++] = message->easy_handle;
        else curl_easy_cleanup(message->easy_handle);
        r->done = 1;
        MHD_resume_connection(r->connection);
    }
}

/* The rest of the broker's answer to a proxied request after its Content-Type: the API's
 * Cache-Control, which the broker passes back, then what ServerCore.makeResponse adds. */
static void add_broker_headers(struct MHD_Response *response) {
    static _Atomic unsigned long answered;
    char id[32];
    snprintf(id, sizeof id, "5f3a9c21-%lx", ++answered);
    MHD_add_response_header(response, "Cache-Control", "no-store");
    MHD_add_response_header(response, "Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'");
    MHD_add_response_header(response, "X-Request-Id", id);
    MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(response, "X-Frame-Options", "DENY");
    MHD_add_response_header(response, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(response, "Keep-Alive", "timeout=30");
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *connection, const char *url, const char *method,
                                 const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls) {
    (void)url; (void)method; (void)version; (void)upload_data;
    if (*con_cls == NULL) {
        request *r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        r->connection = connection;
        r->loop = cls;
        *con_cls = r;
        return MHD_YES;
    }
    request *r = *con_cls;
    if (*upload_data_size != 0) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (r->done) {
        struct MHD_Response *response = r->failed
            ? MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT)
            : MHD_create_response_from_buffer(r->length, r->body, MHD_RESPMEM_MUST_FREE);
        if (!response) return MHD_NO;
        if (!r->failed) r->body = NULL;
        MHD_add_response_header(response, "Content-Type", "application/json");
        if (broker_options) add_broker_headers(response);
        enum MHD_Result queued = MHD_queue_response(connection, r->failed ? MHD_HTTP_BAD_GATEWAY : MHD_HTTP_OK, response);
        MHD_destroy_response(response);
        return queued;
    }
    if (!r->started) {
        r->started = 1;
        MHD_suspend_connection(connection);
        if (one_thread) {
            start_transfer(r->loop, r);
        } else {
            /* As the broker's loop.c: in line, and a wake-up only for a thread that sleeps. */
            pthread_mutex_lock(&shared_loop.lock);
            if (shared_loop.waiting_tail) shared_loop.waiting_tail->next = r; else shared_loop.waiting = r;
            shared_loop.waiting_tail = r;
            if (shared_loop.polling) {
                shared_loop.polling = 0;
                curl_multi_wakeup(shared_loop.multi);
            }
            pthread_mutex_unlock(&shared_loop.lock);
        }
    }
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *connection, void **con_cls, enum MHD_RequestTerminationCode code) {
    (void)cls; (void)connection; (void)code;
    request *r = *con_cls;
    if (r) {
        free(r->body);
        free(r);
    }
    *con_cls = NULL;
}

/* one: this thread's daemon and multi, waited on together. */
static void *run_one(void *context) {
    loop *l = context;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(l->daemon, MHD_DAEMON_INFO_EPOLL_FD);
    struct curl_waitfd server = {info->epoll_fd, CURL_WAIT_POLLIN, 0};
    for (;;) {
        long wait_ms = 1000, curl_ms;
        MHD_UNSIGNED_LONG_LONG server_ms;
        if (MHD_get_timeout(l->daemon, &server_ms) == MHD_YES && server_ms < (MHD_UNSIGNED_LONG_LONG)wait_ms) wait_ms = (long)server_ms;
        if (curl_multi_timeout(l->multi, &curl_ms) == CURLM_OK && curl_ms >= 0 && curl_ms < wait_ms) wait_ms = curl_ms;
        curl_multi_poll(l->multi, &server, 1, (int)wait_ms, NULL);
        MHD_run(l->daemon);
        int running;
        curl_multi_perform(l->multi, &running);
        finish_transfers(l);
        MHD_run(l->daemon); /* answers the connections just resumed */
    }
    return NULL;
}

/* split: the libcurl thread. */
static void *run_split(void *context) {
    loop *l = context;
    for (;;) {
        pthread_mutex_lock(&l->lock);
        l->polling = 0;
        request *waiting = l->waiting;
        l->waiting = l->waiting_tail = NULL;
        pthread_mutex_unlock(&l->lock);
        while (waiting) {
            request *next = waiting->next;
            start_transfer(l, waiting);
            waiting = next;
        }
        int running;
        curl_multi_perform(l->multi, &running);
        finish_transfers(l);
        long wait_ms = 1000;
        if (curl_multi_timeout(l->multi, &wait_ms) != CURLM_OK || wait_ms < 0 || wait_ms > 1000) wait_ms = 1000;
        pthread_mutex_lock(&l->lock);
        if (l->waiting) wait_ms = 0;
        l->polling = wait_ms > 0;
        pthread_mutex_unlock(&l->lock);
        if (wait_ms > 0) curl_multi_poll(l->multi, NULL, 0, (int)wait_ms, NULL);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if ((argc != 5 && argc != 6) || (strcmp(argv[1], "split") != 0 && strcmp(argv[1], "one") != 0)) {
        fprintf(stderr, "usage: proxy_floor split|one PORT THREADS UPSTREAM_URL [SESSIONS]\n");
        return 2;
    }
    one_thread = strcmp(argv[1], "one") == 0;
    int port = atoi(argv[2]);
    int threads = atoi(argv[3]);
    upstream = argv[4];
    if (threads < 1 || threads > MAX_THREADS) { fprintf(stderr, "proxy_floor: THREADS from 1 to %d\n", MAX_THREADS); return 2; }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return 1;
    if (argc == 6) {
        if (one_thread) {
            fprintf(stderr, "proxy_floor: SESSIONS with split only (a share used by several threads needs locks)\n");
            return 2;
        }
        broker_options = 1;
        broker_headers = curl_slist_append(NULL, "Authorization: Bearer 0123456789abcdefghijklmnopqrstuvwxyzABCD");
        broker_headers = broker_headers ? curl_slist_append(broker_headers, "Expect:") : NULL;
        if (broker_headers == NULL) return 1;
        session_count = atoi(argv[5]);
        sessions = session_count > 0 ? calloc((size_t)session_count, sizeof *sessions) : NULL;
        if (session_count < 0 || (session_count > 0 && sessions == NULL)) return 2;
        for (int i = 0; i < session_count; i++) {
            sessions[i] = curl_share_init();
            if (!sessions[i] || curl_share_setopt(sessions[i], CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) != CURLSHE_OK ||
                curl_share_setopt(sessions[i], CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK ||
                curl_share_setopt(sessions[i], CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) != CURLSHE_OK) return 1;
        }
    }

    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals, NULL);

    int listening = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int yes = 1;
    setsockopt(listening, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(listening, (struct sockaddr *)&address, sizeof address) != 0 || listen(listening, 1024) != 0) {
        perror("proxy_floor");
        return 1;
    }
    if (one_thread) {
        for (int i = 0; i < threads; i++) {
            loops[i].multi = curl_multi_init();
            curl_multi_setopt(loops[i].multi, CURLMOPT_MAXCONNECTS, 256L);
            loops[i].daemon = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, NULL, NULL,
                                               on_access, &loops[i], MHD_OPTION_LISTEN_SOCKET, listening,
                                               MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                                               MHD_OPTION_CONNECTION_TIMEOUT, 30, MHD_OPTION_END);
            if (!loops[i].multi || !loops[i].daemon) { fprintf(stderr, "proxy_floor: cannot start\n"); return 1; }
            pthread_create(&loops[i].thread, NULL, run_one, &loops[i]);
        }
    } else {
        shared_loop.multi = curl_multi_init();
        /* With SESSIONS, the broker's bound (loop.c): libcurl applies it to each share's cache, so
         * that each key keeps at most as many connections as the loop runs transfers (128). */
        curl_multi_setopt(shared_loop.multi, CURLMOPT_MAXCONNECTS, broker_options && session_count > 0 ? 128L : 256L);
        pthread_mutex_init(&shared_loop.lock, NULL);
        struct MHD_Daemon *daemon = MHD_start_daemon(
            MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, NULL, NULL,
            on_access, NULL, MHD_OPTION_LISTEN_SOCKET, listening, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
            MHD_OPTION_CONNECTION_TIMEOUT, 30, threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, (unsigned int)threads,
            MHD_OPTION_END);
        if (!shared_loop.multi || !daemon) { fprintf(stderr, "proxy_floor: cannot start\n"); return 1; }
        pthread_create(&shared_loop.thread, NULL, run_split, &shared_loop);
    }
    printf("listening %d\n", port);
    fflush(stdout);
    int received;
    sigwait(&signals, &received);
    return 0;
}
