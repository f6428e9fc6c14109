// Answering a request that libmicrohttpd no longer takes a response for.
//
// libmicrohttpd 0.9.75 accepts a response only when a request's head is complete or its whole
// body has arrived (MHD_queue_response refuses any other state: connection.c). A chunked body
// that passes the limit is only noticed while it arrives; waiting for its end would mean reading
// whatever the client sends. So the shim writes that answer to the socket itself (through the
// TLS session with HTTPS), always with `Connection: close`, and ends the sending side. The
// connection then drains (server.c): libmicrohttpd reads what the client still sends and the
// access handler drops it, until the body ends, TB_DRAIN_BYTES were read or the watchdog cuts
// the connection TB_DRAIN_NS after the answer. Nothing waits on the server thread, which a
// client sending such requests would otherwise hold. It happens on the connection's own thread,
// inside the access handler, while libmicrohttpd writes nothing.
#include "shim_internal.h"

#include <errno.h>
#include <gnutls/gnutls.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

// How long a direct answer may take to leave; it is small and the socket's buffer is empty.
static const int tb_direct_timeout_ms = 1000;

typedef struct {
    char *bytes;
    size_t length;
    size_t capacity;
    int failed;
} tb_text;

static void tb_text_append(tb_text *text, const void *bytes, size_t length) {
    if (text->failed) return;
    if (text->length + length > text->capacity) {
        size_t capacity = text->capacity == 0 ? 1024 : text->capacity;
        while (capacity < text->length + length) capacity *= 2;
        char *grown = realloc(text->bytes, capacity);
        if (grown == NULL) {
            text->failed = 1;
            return;
        }
        text->bytes = grown;
        text->capacity = capacity;
    }
    memcpy(text->bytes + text->length, bytes, length);
    text->length += length;
}

static void tb_text_line(tb_text *text, const char *name, const char *value) {
    tb_text_append(text, name, strlen(name));
    tb_text_append(text, ": ", 2);
    tb_text_append(text, value, strlen(value));
    tb_text_append(text, "\r\n", 2);
}

static enum MHD_Result tb_add_header_line(void *cls, enum MHD_ValueKind kind, const char *key,
                                          const char *value) {
    (void)kind;
    // The connection closes whatever the response said.
    if (strcasecmp(key, MHD_HTTP_HEADER_CONNECTION) != 0) tb_text_line(cls, key, value);
    return MHD_YES;
}

// The response as bytes: status line, the headers libmicrohttpd would add, the response's own.
static tb_text tb_serialize(const tb_request *request, const tb_response *response) {
    tb_text text = {0};
    char line[128];
    const char *reason = MHD_get_reason_phrase_for(response->status);
    int length = snprintf(line, sizeof line, "HTTP/1.1 %u %s\r\n", response->status,
                          reason[0] != '\0' ? reason : "Unknown");
    tb_text_append(&text, line, (size_t)length);
    time_t now = time(NULL);
    struct tm utc;
    gmtime_r(&now, &utc);
    strftime(line, sizeof line, "%a, %d %b %Y %H:%M:%S GMT", &utc);
    tb_text_line(&text, MHD_HTTP_HEADER_DATE, line);
    MHD_get_response_headers(response->mhd, tb_add_header_line, &text);
    snprintf(line, sizeof line, "%zu", response->length);
    tb_text_line(&text, MHD_HTTP_HEADER_CONTENT_LENGTH, line);
    tb_text_line(&text, MHD_HTTP_HEADER_CONNECTION, "close");
    tb_text_append(&text, "\r\n", 2);
    if (strcmp(request->method, MHD_HTTP_METHOD_HEAD) != 0 && response->length > 0) {
        tb_text_append(&text, response->body, response->length);
    }
    return text;
}

// Sends all of `bytes` on the non-blocking socket, or over its TLS session when there is one.
static int tb_send_all(int fd, void *tls, const char *bytes, size_t length) {
    size_t sent = 0;
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (sent < length) {
        ssize_t written = tls != NULL
                              ? gnutls_record_send(tls, bytes + sent, length - sent)
                              : send(fd, bytes + sent, length - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (written > 0) {
            sent += (size_t)written;
            continue;
        }
        int again = tls != NULL ? (written == GNUTLS_E_AGAIN || written == GNUTLS_E_INTERRUPTED)
                                : (written < 0 && (errno == EAGAIN || errno == EINTR));
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long waited_ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (!again || waited_ms >= tb_direct_timeout_ms) return 0;
        struct pollfd writable = {.fd = fd, .events = POLLOUT};
        poll(&writable, 1, (int)(tb_direct_timeout_ms - waited_ms));
    }
    return 1;
}

// Ends the sending side: TLS close_notify, then FIN. The socket stays open for reading, so that
// what the client still sends is read (and dropped) rather than answered with a reset, which can
// discard the answer before the client reads it.
static void tb_end_sending(int fd, void *tls) {
    if (tls != NULL) gnutls_bye(tls, GNUTLS_SHUT_WR);
    shutdown(fd, SHUT_WR);
}

int tb_answer_directly(tb_request *request, tb_response *response) {
    const union MHD_ConnectionInfo *socket_info =
        MHD_get_connection_info(request->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *tls_info =
        MHD_get_connection_info(request->connection, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    tb_text text = tb_serialize(request, response);
    tb_response_free(response);
    int sent = socket_info != NULL && !text.failed &&
               tb_send_all(socket_info->connect_fd, tls_info != NULL ? tls_info->tls_session : NULL,
                           text.bytes, text.length);
    free(text.bytes);
    if (sent) tb_end_sending(socket_info->connect_fd, tls_info != NULL ? tls_info->tls_session : NULL);
    return sent;
}

// The answer to a target with more query parameters than libmicrohttpd keeps: every response's
// security headers, as ServerCore sets them, and the API's error.
static const char tb_too_many_parameters[] =
    "HTTP/1.1 414 URI Too Long\r\n"
    "Content-Type: application/json\r\n"
    "Cache-Control: no-store\r\n"
    "X-Content-Type-Options: nosniff\r\n"
    "X-Frame-Options: DENY\r\n"
    "Referrer-Policy: no-referrer\r\n"
    "Content-Security-Policy: default-src 'none'; frame-ancestors 'none'\r\n"
    "Connection: close\r\n"
    "Content-Length: 81\r\n"
    "\r\n"
    "{\"error\":\"uri_too_long\",\"error_description\":\"The query has too many parameters.\"}";

int tb_refuse_target(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *socket_info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *tls_info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (socket_info == NULL) return 0;
    void *tls = tls_info != NULL ? tls_info->tls_session : NULL;
    int sent = tb_send_all(socket_info->connect_fd, tls, tb_too_many_parameters, sizeof tb_too_many_parameters - 1);
    tb_end_sending(socket_info->connect_fd, tls);
    return sent;
}
