// The server's side of the shim: the daemon, and libmicrohttpd's callbacks that drive a request
// through its life cycle (include/mhd_shim.h). The listening socket is listen.c's.
#include "shim_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static tb_connection *tb_connection_of(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info != NULL ? info->socket_context : NULL;
}

// The connection's client address as text into `buffer` (empty when unknown).
static void tb_client_ip(struct MHD_Connection *connection, char *buffer, size_t size) {
    buffer[0] = '\0';
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info == NULL || info->client_addr == NULL) return;
    const struct sockaddr *address = info->client_addr;
    if (address->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)address)->sin_addr, buffer,
                  (socklen_t)size);
    } else if (address->sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)address)->sin6_addr, buffer,
                  (socklen_t)size);
    }
}

// Called by libmicrohttpd with the raw request target, before it strips the query string; its
// return value becomes the request's closure pointer.
static void *tb_on_uri(void *cls, const char *uri, struct MHD_Connection *connection) {
    tb_server *server = cls;
    size_t target_length = uri != NULL ? strlen(uri) : 0;
    const char *query = uri != NULL ? memchr(uri, '?', target_length) : NULL;
    if (query != NULL) {
        size_t parameters = 1;
        for (const char *c = query; *c != '\0' && parameters <= TB_MAX_QUERY_PARAMETERS; c++) parameters += *c == '&';
        if (parameters > TB_MAX_QUERY_PARAMETERS) {
            tb_refuse_target(connection);
            tb_connection *owner = tb_connection_of(connection);
            // Without the watchdog, or its socket, the connection closes when the idle timeout
            // comes, or when the client closes it.
            if (owner != NULL) tb_watch_cut_after(server, owner, TB_DRAIN_NS);
            return NULL; // the access handler, if it is called, closes the connection
        }
    }
    tb_request *request = calloc(1, sizeof(tb_request) + target_length + 1);
    if (request == NULL) return NULL; // the access handler then closes the connection
    if (target_length > 0) memcpy(request->target, uri, target_length);
    request->raw_target = uri;
    request->target_length = target_length;
    request->server = server;
    request->owner = tb_connection_of(connection);
    if (request->owner != NULL) {
        request->owner->open_request = request;
        memcpy(request->client_ip, request->owner->client_ip, sizeof request->client_ip);
    } else {
        tb_client_ip(connection, request->client_ip, sizeof request->client_ip);
    }
    __atomic_add_fetch(&server->active_requests, 1, __ATOMIC_RELAXED);
    request->start_ns = tb_monotonic_ns();
    request->references = 1;
    pthread_mutex_init(&request->lock, NULL);
    return request;
}

// The end of a request: its MHD reference goes, and it is no longer active.
static void tb_finish(tb_server *server, tb_request *request) {
    if (request->owner != NULL && request->owner->open_request == request) {
        request->owner->open_request = NULL;
    }
    __atomic_sub_fetch(&server->active_requests, 1, __ATOMIC_RELEASE);
    tb_request_release(request);
}

static void tb_on_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                            enum MHD_RequestTerminationCode code) {
    (void)connection;
    (void)code;
    tb_request *request = *con_cls;
    *con_cls = NULL;
    if (request == NULL) return;
    // The connection now idles until its next request.
    if (request->owner != NULL) tb_watch_idle(cls, request->owner);
    tb_finish(cls, request);
}

static void tb_on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                             enum MHD_ConnectionNotificationCode code) {
    tb_server *server = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        char ip[INET6_ADDRSTRLEN];
        tb_connection *state = calloc(1, sizeof(tb_connection));
        tb_client_ip(connection, ip, sizeof ip);
        int admission = server->callbacks.on_connection_open(server->context, ip);
        const union MHD_ConnectionInfo *socket_info =
            MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        int fd = socket_info != NULL ? socket_info->connect_fd : -1;
        if (admission < 0 || state == NULL) {
            // Closed at once: a client holding as many refused connections as it may (a
            // connection that never sends would hold a slot of libmicrohttpd's own limit until
            // the idle timeout), or no memory to track it. libmicrohttpd reads the end of the
            // stream and closes it; its requests meanwhile are answered as over the limit.
            if (admission >= 0) server->callbacks.on_connection_close(server->context, ip, admission);
            if (fd >= 0) shutdown(fd, SHUT_RDWR);
            free(state);
            state = NULL;
        } else {
            state->admitted = admission;
            memcpy(state->client_ip, ip, sizeof ip);
            // Without its socket the watchdog cannot watch it (watchdog.c skips fd -1): the
            // idle timeout alone bounds it.
            tb_watch_open(server, state, fd);
        }
        *socket_context = state;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        tb_connection *state = *socket_context;
        *socket_context = NULL;
        if (state == NULL) return;
        // First: libmicrohttpd closes the socket once this returns (watchdog.c).
        tb_watch_close(server, state);
        // A request libmicrohttpd dropped without NOTIFY_COMPLETED (see tb_connection).
        if (state->open_request != NULL) tb_finish(server, state->open_request);
        server->callbacks.on_connection_close(server->context, state->client_ip, state->admitted);
        free(state);
    }
}

static void tb_on_log(void *cls, const char *format, va_list arguments) {
    tb_server *server = cls;
    char message[512];
    vsnprintf(message, sizeof message, format, arguments);
    size_t length = strlen(message);
    while (length > 0 && (message[length - 1] == '\n' || message[length - 1] == '\r')) {
        message[--length] = '\0';
    }
    server->callbacks.on_log(server->context, message, 1);
}

// Hands the request to Swift, then suspends it if Swift deferred and has not answered yet.
static enum MHD_Result tb_dispatch(tb_server *server, tb_request *request) {
    request->dispatched = 1;
    if (request->owner != NULL) tb_watch_dispatched(request->owner);
    server->callbacks.on_request(server->context, request);
    if (request->responded) return MHD_YES;
    // Answered directly or not at all; never suspended (the connection closes now).
    if (request->direct) return MHD_NO;
    pthread_mutex_lock(&request->lock);
    if (!request->deferred) {
        pthread_mutex_unlock(&request->lock);
        return MHD_NO; // Swift gave no answer: close rather than hang.
    }
    int completed = request->completed;
    void *ready = request->pending;
    request->pending = NULL;
    if (!completed) {
        MHD_suspend_connection(request->connection);
        request->suspended = 1;
    }
    pthread_mutex_unlock(&request->lock);
    if (!completed) return MHD_YES;
    return tb_queue_pending(request, ready);
}

static tb_limit tb_initial_limit(const tb_server *server, const tb_request *request,
                                 tb_limit framing) {
    struct MHD_Connection *connection = request->connection;
    const tb_connection *state = tb_connection_of(connection);
    if (state == NULL || !state->admitted) return TB_LIMIT_CONNECTIONS;
    if (framing != TB_LIMIT_NONE) return framing;
    const char *length =
        MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (length != NULL) {
        errno = 0;
        char *end = NULL;
        unsigned long long declared = strtoull(length, &end, 10);
        if (errno != 0 || end == length || declared > server->max_body_bytes) return TB_LIMIT_BODY;
    }
    return TB_LIMIT_NONE;
}

static int tb_has_body(struct MHD_Connection *connection) {
    const char *length =
        MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (length != NULL) return strcmp(length, "0") != 0;
    return MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
                                       MHD_HTTP_HEADER_TRANSFER_ENCODING) != NULL;
}

static int tb_append_body(tb_request *request, const char *data, size_t size, size_t limit) {
    if (request->body_length + size > limit) return 0;
    if (request->body_length + size > request->body_capacity) {
        size_t capacity = request->body_capacity == 0 ? 1024 : request->body_capacity;
        while (capacity < request->body_length + size) capacity *= 2;
        if (capacity > limit) capacity = limit;
        uint8_t *grown = realloc(request->body, capacity);
        if (grown == NULL) return 0;
        request->body = grown;
        request->body_capacity = capacity;
    }
    memcpy(request->body + request->body_length, data, size);
    request->body_length += size;
    return 1;
}

// After a direct answer: libmicrohttpd goes on reading the body, which the access handler drops,
// until the watchdog cuts the connection (TB_DRAIN_NS from now); MHD_NO, which closes it now,
// when the answer was not sent.
static enum MHD_Result tb_drain(tb_server *server, tb_request *request) {
    if (!request->responded) return MHD_NO;
    if (request->owner != NULL) tb_watch_cut_after(server, request->owner, TB_DRAIN_NS);
    return MHD_YES;
}

static enum MHD_Result tb_on_access(void *cls, struct MHD_Connection *connection, const char *url,
                                    const char *method, const char *version,
                                    const char *upload_data, size_t *upload_data_size,
                                    void **con_cls) {
    (void)url;
    tb_server *server = cls;
    tb_request *request = *con_cls;
    if (request == NULL) return MHD_NO; // allocation failed in tb_on_uri

    if (!request->started) {
        request->started = 1;
        request->connection = connection;
        request->method = method;
        // One walk over the headers: the framing checks, and header_bytes.
        tb_limit framing = tb_check_framing(request, method, version);
        if (request->owner != NULL) tb_watch_body(server, request->owner);
        request->limit = tb_initial_limit(server, request, framing);
        if (request->limit == TB_LIMIT_BODY) {
            // A declared length over the limit: answer now, then drain (direct.c), so that a
            // proxy in front reads the 413 instead of a reset. libmicrohttpd would answer only
            // once the whole body is in.
            request->direct = 1;
            tb_dispatch(server, request);
            // A client waiting for "100 Continue" sends nothing more: close now, before
            // libmicrohttpd sends one after the answer.
            if (MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT) != NULL) return MHD_NO;
            return tb_drain(server, request);
        }
        if (request->limit != TB_LIMIT_NONE) return tb_dispatch(server, request);
        // libmicrohttpd 0.9.75 sends "100 Continue" even to a request without a body that asks
        // for it, and a pipelined byte after it then makes it spin a core until the idle timeout
        // (found by fuzzing; Tests/IntegrationTests/LimitsTests.swift). Such a request is
        // complete already: answering it now sends no "100 Continue" (and closes the
        // connection, which is why other requests are not answered this early).
        if (!tb_has_body(connection) &&
            MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT) != NULL) {
            return tb_dispatch(server, request);
        }
        return MHD_YES;
    }

    if (*upload_data_size != 0) {
        size_t size = *upload_data_size;
        *upload_data_size = 0;
        if (request->direct) {
            request->drained += size;
            return request->drained <= TB_DRAIN_BYTES ? MHD_YES : MHD_NO;
        }
        if (request->owner != NULL) tb_watch_body_bytes(server, request->owner, size);
        if (!request->dispatched && request->limit == TB_LIMIT_NONE &&
            !tb_append_body(request, upload_data, size, server->max_body_bytes)) {
            // A body (chunked: its length was not declared) passes the limit while it arrives:
            // answer now, then drain (direct.c).
            request->limit = TB_LIMIT_BODY;
            request->direct = 1;
            tb_dispatch(server, request);
            return tb_drain(server, request);
        }
        return MHD_YES;
    }

    // The body drained to its end after a direct answer: nothing is left unread to reset.
    if (request->direct) return MHD_NO;
    if (!request->dispatched) return tb_dispatch(server, request);

    // Called again after tb_request_complete() resumed the connection.
    if (request->responded) return MHD_YES;
    pthread_mutex_lock(&request->lock);
    void *ready = request->pending;
    request->pending = NULL;
    pthread_mutex_unlock(&request->lock);
    return tb_queue_pending(request, ready);
}

tb_server *tb_server_start(const tb_server_options *options, tb_callbacks callbacks,
                           void *context, char *error, size_t error_size) {
    if (!callbacks.on_request || !callbacks.on_connection_open || !callbacks.on_connection_close ||
        !callbacks.on_log || !callbacks.build_answer || !callbacks.drop_answer) {
        snprintf(error, error_size, "a callback is missing");
        close(options->listen_socket);
        return NULL;
    }
    tb_server *server = calloc(1, sizeof(tb_server));
    if (server == NULL) {
        snprintf(error, error_size, "out of memory");
        close(options->listen_socket);
        return NULL;
    }
    server->callbacks = callbacks;
    server->context = context;
    server->max_body_bytes = options->max_body_bytes;
    if (!tb_watchdog_start(server, options->request_head_timeout_seconds,
                           options->request_body_min_rate, error, error_size)) {
        close(options->listen_socket);
        free(server);
        return NULL;
    }
    tb_stream_list_init(&server->streams);

    struct MHD_OptionItem items[] = {
        // First, so that libmicrohttpd's messages about the other options reach it too.
        {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)tb_on_log, server},
        {MHD_OPTION_LISTEN_SOCKET, options->listen_socket, NULL},
        {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)tb_on_uri, server},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)tb_on_completed, server},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)tb_on_connection, server},
        {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)options->idle_timeout_seconds, NULL},
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)options->connection_memory_bytes, NULL},
        {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)options->hard_connection_limit, NULL},
        {MHD_OPTION_END, 0, NULL}, // thread pool (below)
        {MHD_OPTION_END, 0, NULL}, // TLS certificate (below)
        {MHD_OPTION_END, 0, NULL}, // TLS key (below)
        {MHD_OPTION_END, 0, NULL},
    };
    size_t next = sizeof items / sizeof items[0] - 4;
    // A pool of one makes libmicrohttpd warn; one thread is the polling thread itself.
    if (options->threads > 1) {
        items[next++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)options->threads, NULL};
    }
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                         MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (options->tls_certificate_pem != NULL && options->tls_key_pem != NULL) {
        flags |= MHD_USE_TLS;
        items[next++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)options->tls_certificate_pem};
        items[next++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)options->tls_key_pem};
    }
    server->daemon = MHD_start_daemon(flags, 0, NULL, NULL, tb_on_access, server,
                                      MHD_OPTION_ARRAY, items, MHD_OPTION_END);
    if (server->daemon == NULL) {
        snprintf(error, error_size, "libmicrohttpd could not start (see its message above)");
        close(options->listen_socket);
        tb_watchdog_stop(server);
        tb_stream_list_destroy(&server->streams);
        free(server);
        return NULL;
    }
    return server;
}

int tb_server_active_requests(tb_server *server) {
    return __atomic_load_n(&server->active_requests, __ATOMIC_ACQUIRE);
}

void tb_server_quiesce(tb_server *server) {
    MHD_socket listener = MHD_quiesce_daemon(server->daemon);
    if (listener == MHD_INVALID_SOCKET) {
        // Not expected with this daemon's flags; the stop closes the listening socket then.
        server->callbacks.on_log(server->context, "could not stop accepting connections before the stop "
                                                  "(MHD_quiesce_daemon failed): new connections are closed at the stop", 0);
        return;
    }
    close(listener);
}

void tb_server_stop(tb_server *server) {
    // Streamed answers still open end first: a suspended connection would abort the stop.
    tb_streams_end(server, 2000);
    tb_wait_for_resumes(server);
    // The daemon first: closing its connections still takes the watchdog's lock and frees
    // the responses of the streams still listed.
    MHD_stop_daemon(server->daemon);
    tb_watchdog_stop(server);
    tb_stream_list_destroy(&server->streams);
    free(server);
}
