// One API proxy transfer (curl_internal.h's tb_transfer): its copy of the request, its libcurl
// options and callbacks, and how its end is told to its caller. The loop (loop.c) runs it.

#include "curl_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <limits.h>
#include <openssl/ssl.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

long long tb_now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

// MARK: the copy

tb_transfer *tb_transfer_copy(const tb_proxy_request *request, tb_proxy_loop *loop, uint64_t tag) {
    const char *key = request->connection_key ? request->connection_key : "";
    size_t method = strlen(request->method) + 1, url = strlen(request->url) + 1, keyed = strlen(key) + 1;
    size_t lines = 0;
    for (size_t i = 0; i < request->header_count; i++) lines += strlen(request->headers[i]) + 1;
    size_t pointers = request->header_count * sizeof(char *);
    tb_transfer *transfer = calloc(1, sizeof *transfer);
    char *owned = malloc(pointers + method + url + keyed + lines + request->body_length + 1);
    if (transfer == NULL || owned == NULL) {
        free(transfer);
        free(owned);
        return NULL;
    }
    transfer->owned = owned;
    transfer->loop = loop;
    transfer->tag = tag;
    transfer->deadline_ms = tb_now_ms() + request->timeout_ms;
    transfer->request = *request;
    const char **headers = (const char **)owned; // first: aligned for the pointers
    char *cursor = owned + pointers;
#define COPY(field, text, size) memcpy(cursor, text, size), field = cursor, cursor += size
    COPY(transfer->request.method, request->method, method);
    COPY(transfer->request.url, request->url, url);
    COPY(transfer->request.connection_key, key, keyed);
    for (size_t i = 0; i < request->header_count; i++) {
        size_t size = strlen(request->headers[i]) + 1;
        COPY(headers[i], request->headers[i], size);
    }
#undef COPY
    transfer->request.headers = headers;
    if (request->body_length > 0) memcpy(cursor, request->body, request->body_length);
    transfer->request.body = (const uint8_t *)cursor;
    return transfer;
}

// MARK: the callbacks

static int append(char **buffer, size_t *length, size_t *capacity, const char *data, size_t size) {
    if (*length + size + 1 > *capacity) {
        size_t wanted = *capacity ? *capacity : 1024;
        while (*length + size + 1 > wanted) wanted *= 2;
        char *grown = realloc(*buffer, wanted);
        if (!grown) return 0;
        *buffer = grown;
        *capacity = wanted;
    }
    memcpy(*buffer + *length, data, size);
    *length += size;
    (*buffer)[*length] = 0;
    return 1;
}

static size_t on_body(char *data, size_t size, size_t count, void *context) {
    tb_transfer *x = context;
    size_t bytes = size * count;
    if (x->response.streamed) {
        if (x->streamed_bytes + bytes > x->request.max_response_bytes) {
            x->too_large = 1;
            return 0;
        }
        // A sink that has no room calls tb_proxy_resume() later, maybe before this returns: the
        // loop is held for that call first.
        tb_loop_hold(x->loop);
        int taken = x->request.on_body(x->request.context, (const uint8_t *)data, bytes, x->tag);
        if (taken == TB_BODY_FULL) {
            // libcurl keeps these bytes and offers them again once resumed (loop.c).
            x->paused = 1;
            return CURL_WRITEFUNC_PAUSE;
        }
        tb_loop_drop(x->loop); // the loop's thread holds it too: never the last reference
        if (taken != TB_BODY_TAKEN) return 0;
        x->streamed_bytes += bytes;
        return bytes;
    }
    if (x->response.body_length + bytes > x->request.max_response_bytes) {
        x->too_large = 1;
        return 0; // aborts the transfer: never a truncated answer
    }
    if (!append((char **)&x->response.body, &x->response.body_length, &x->body_capacity, data, bytes)) return 0;
    return bytes;
}

// Whether the connection may serve another request after this answer: only after one libcurl
// frames exactly. After a 1xx, a 204 or a 304 (as after a HEAD, prepare's rule) an API may still
// send a body libcurl does not expect, which the next request on the connection would read as
// its answer. A failed transfer's connection libcurl closes itself.
static int framed_exactly(long status, int interim) {
    return !interim && status != 204 && status != 304;
}

// Whether a Content-Length field line's values (a list, RFC 9110 8.6) agree with each other and
// with those before them; libcurl takes the last, so an answer with two lengths would pass as
// whichever came last. Such an answer cannot be framed (RFC 9112 6.3): the transfer fails.
static int lengths_agree(tb_transfer *x, const char *line, size_t bytes) {
    static const char name[] = "content-length:";
    if (bytes < sizeof name - 1 || strncasecmp(line, name, sizeof name - 1) != 0) return 1;
    const char *p = line + sizeof name - 1, *end = line + bytes;
    for (;;) {
        while (p < end && (*p == ' ' || *p == '\t')) p++;
        long long value = 0;
        int digits = 0;
        while (p < end && *p >= '0' && *p <= '9' && value <= (LLONG_MAX - 9) / 10) value = value * 10 + (*p++ - '0'), digits++;
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
        if (!digits || (x->has_length && value != x->length)) return 0;
        x->has_length = 1;
        x->length = value;
        if (p == end) return 1;
        if (*p++ != ',') return 0;
    }
}

static size_t on_header(char *data, size_t size, size_t count, void *context) {
    tb_transfer *x = context;
    size_t bytes = size * count;
    // A chunked body's trailer fields, which libcurl hands here too: never merged into the
    // answer's head (RFC 9110 6.5.1), where one would add or override a field the app gets.
    if (x->final_head_ended) return bytes;
    if (bytes >= 5 && memcmp(data, "HTTP/", 5) == 0) {
        // A new answer begins (after a 100 Continue): keep only the last one's headers.
        x->response.headers_length = 0;
        x->has_length = 0;
        return bytes;
    }
    if (!lengths_agree(x, data, bytes)) {
        x->conflicting_length = 1;
        return 0;
    }
    if (bytes <= 2) { // the blank line that ends a head
        long status = 0;
        // Without the status the answer cannot be framed: the transfer ends (failed).
        if (curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK) return 0;
        if (status == 101) {
            // libcurl would read whatever follows as a body until the connection closed.
            x->switched = 1;
            return 0;
        }
        // libcurl reads this option when the transfer is done, to keep or close the connection.
        if (!framed_exactly(status, status < 200) && curl_easy_setopt(x->easy, CURLOPT_FORBID_REUSE, 1L) != CURLE_OK) return 0;
        if (status >= 200) x->final_head_ended = 1;
        if (status >= 200 && !x->head_done && x->request.on_head != NULL) {
            x->head_done = 1;
            curl_off_t length = -1;
            if (curl_easy_getinfo(x->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) != CURLE_OK) length = -1; // unknown
            const char *headers = x->response.headers ? x->response.headers : "";
            int chosen = x->request.on_head(x->request.context, status, headers, x->response.headers_length, (long long)length);
            x->response.streamed = chosen != TB_HEAD_HOLD;
            if (chosen == TB_HEAD_STOP) return 0; // aborts the transfer, as a sink that stops does
        }
        return bytes;
    }
    if (!append(&x->response.headers, &x->response.headers_length, &x->headers_capacity, data, bytes)) return 0;
    return bytes;
}

static curl_socket_t on_open_socket(void *context, curlsocktype purpose, struct curl_sockaddr *address) {
    tb_transfer *x = context;
    (void)purpose;
    if (!x->request.allow_private_addresses && tb_refused_sockaddr(&address->addr)) {
        x->refused = 1;
        return CURL_SOCKET_BAD;
    }
    curl_socket_t opened = socket(address->family, address->socktype, address->protocol);
    if (opened != CURL_SOCKET_BAD) {
        tb_loop_socket(x->loop, 1);
        if (x->opened_count == 4) memmove(x->opened, x->opened + 1, 3 * sizeof *x->opened), x->opened_count = 3;
        x->opened[x->opened_count++] = opened;
    }
    return opened;
}

// Whether TLS holds bytes of the connection `easy` is given that were received and not read:
// OpenSSL decrypts a whole record, and libcurl reads no further than an answer's length, so the
// rest of a record that carried the end of an answer and more waits there, not on the socket.
static int tls_holds_bytes(CURL *easy) {
    struct curl_tlssessioninfo *tls = NULL;
    if (curl_easy_getinfo(easy, CURLINFO_TLS_SSL_PTR, &tls) != CURLE_OK || tls == NULL || tls->internals == NULL) return 0;
    return tls->backend == CURLSSLBACKEND_OPENSSL && SSL_has_pending(tls->internals);
}

// Before a request goes out on a connection: one kept from an earlier transfer must be clean — no
// bytes waiting on it, on its socket or inside TLS (an API that sent more after its last answer,
// a TLS close), the other end not gone. libcurl 7.88 reuses a connection with bytes waiting, and
// the request would read them as its answer: another session's, in a shared pool. Such a
// connection is given up (the transfer aborts before sending, and libcurl closes it) and the
// transfer runs again on a new one; so is one whose socket was never noted, which cannot be
// checked.
static int on_prerequest(void *context, char *remote, char *local, int remote_port, int local_port) {
    (void)local;
    tb_transfer *x = context;
    long opened = 0;
    if (curl_easy_getinfo(x->easy, CURLINFO_NUM_CONNECTS, &opened) != CURLE_OK) return CURL_PREREQFUNC_OK;
    if (opened > 0) {
        // A new connection: which of the sockets this transfer opened it is (libcurl 7.88 tells a
        // transfer its socket only once it has ended), noted for the transfers that reuse it.
        for (int i = 0; i < x->opened_count; i++) {
            if (tb_local_port(x->opened[i]) == local_port) tb_kept_note(tb_loop_kept(x->loop), local_port, x->opened[i]);
        }
        return CURL_PREREQFUNC_OK;
    }
    curl_socket_t socket = tb_kept_find(tb_loop_kept(x->loop), local_port, remote, remote_port);
    if (socket != CURL_SOCKET_BAD && !tls_holds_bytes(x->easy)) {
        char byte;
        ssize_t peeked = recv(socket, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (peeked < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return CURL_PREREQFUNC_OK;
    }
    x->stale = 1;
    return CURL_PREREQFUNC_ABORT;
}

int tb_transfer_retries_fresh(tb_transfer *x, CURLcode code) {
    if (code != CURLE_ABORTED_BY_CALLBACK || !x->stale || x->retried) return 0;
    x->stale = 0;
    x->retried = 1;
    long left = (long)(x->deadline_ms - tb_now_ms());
    return left > 0 && curl_easy_setopt(x->easy, CURLOPT_FRESH_CONNECT, 1L) == CURLE_OK
        && curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, left) == CURLE_OK;
}

// A connection's socket closes, maybe long after the transfer that opened it: the context is the
// loop, which outlives its connections (its key table closes them before it goes).
static int on_close_socket(void *context, curl_socket_t socket) {
    tb_kept_forget(tb_loop_kept(context), socket);
    tb_loop_socket(context, 0);
    return close(socket);
}

// MARK: the options

int tb_transfer_prepare(tb_transfer *x, CURL *easy) {
    const tb_proxy_request *request = &x->request;
    x->easy = easy;
    for (size_t i = 0; i < request->header_count; i++) {
        struct curl_slist *next = curl_slist_append(x->header_list, request->headers[i]);
        if (!next) return 0;
        x->header_list = next;
    }
    long left = (long)(x->deadline_ms - tb_now_ms());
    if (left < 1) left = 1;
    long connect = request->connect_timeout_ms < left ? request->connect_timeout_ms : left;
    // Each result is checked: an option libcurl did not take would drop a rule silently (the
    // https-only CURLOPT_PROTOCOLS_STR, the address check of CURLOPT_OPENSOCKETFUNCTION).
#define SET(option, value) \
    if (curl_easy_setopt(easy, option, value) != CURLE_OK) return 0
    SET(CURLOPT_PRIVATE, x);
    SET(CURLOPT_URL, request->url);
    SET(CURLOPT_PROTOCOLS_STR, request->allow_http ? "http,https" : "https");
    // HTTP/1.1 over TLS too (libcurl would offer h2): the connection rules here — one answer at a
    // time, reused only after one framed exactly, a client that does not read pausing only its
    // own transfer — are HTTP/1.1's. On an HTTP/2 connection libcurl 7.88 stops reading every
    // stream while one is paused.
    SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    SET(CURLOPT_FOLLOWLOCATION, 0L);
    SET(CURLOPT_PROXY, ""); // never a proxy from the environment
    SET(CURLOPT_NOSIGNAL, 1L);
    // A transfer ended while its name is still being resolved leaves the resolver's thread to
    // finish alone; without this libcurl joins it, and the loop's thread — every transfer —
    // would wait for a slow DNS answer.
    SET(CURLOPT_QUICK_EXIT, 1L);
    SET(CURLOPT_TIMEOUT_MS, left);
    SET(CURLOPT_CONNECTTIMEOUT_MS, connect);
    // Not for a HEAD, whose announced length libcurl would check all the same: it brings no body.
    if (strcmp(request->method, "HEAD") != 0) SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)request->max_response_bytes);
    if (request->silence_timeout_ms > 0) {
        SET(CURLOPT_LOW_SPEED_LIMIT, 1L);
        SET(CURLOPT_LOW_SPEED_TIME, request->silence_timeout_ms < 1000 ? 1L : request->silence_timeout_ms / 1000);
    }
    SET(CURLOPT_USERAGENT, "token-broker");
    SET(CURLOPT_HTTPHEADER, x->header_list);
    SET(CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
    SET(CURLOPT_OPENSOCKETDATA, x);
    SET(CURLOPT_CLOSESOCKETFUNCTION, on_close_socket);
    SET(CURLOPT_PREREQFUNCTION, on_prerequest);
    SET(CURLOPT_PREREQDATA, x);
    SET(CURLOPT_CLOSESOCKETDATA, x->loop);
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, x);
    SET(CURLOPT_HEADERFUNCTION, on_header);
    SET(CURLOPT_HEADERDATA, x);
    // Below the idle timeout of common APIs and balancers (60 s): a kept connection is not
    // reused once the other end may have closed it.
    SET(CURLOPT_MAXAGE_CONN, 55L);
    if (request->ca_store && !tb_ca_store_use(request->ca_store, easy)) return 0;
    if (strcmp(request->method, "HEAD") == 0) {
        SET(CURLOPT_NOBODY, 1L);
        SET(CURLOPT_FORBID_REUSE, 1L); // an API may send a body after it all the same
    } else if (strcmp(request->method, "GET") != 0 || request->has_body) {
        SET(CURLOPT_CUSTOMREQUEST, request->method);
    }
    if (request->has_body) {
        SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)request->body_length);
        SET(CURLOPT_POSTFIELDS, request->body_length ? (const char *)request->body : "");
    }
#undef SET
    return 1;
}

// MARK: the end

static void hand_over(tb_transfer *x) {
    x->request.on_done(x->request.context, &x->response);
    curl_slist_free_all(x->header_list);
    free(x->response.headers);
    free(x->response.body);
    free(x->owned);
    free(x);
}

void tb_transfer_end_as(tb_transfer *x, int outcome, const char *error) {
    x->response.outcome = outcome;
    snprintf(x->response.error, sizeof x->response.error, "%s", error);
    hand_over(x);
}

void tb_transfer_end(tb_transfer *x, CURLcode code) {
    tb_proxy_response *response = &x->response;
    if (curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &response->status) != CURLE_OK) response->status = 0;
    if (curl_easy_getinfo(x->easy, CURLINFO_NUM_CONNECTS, &response->new_connections) != CURLE_OK) response->new_connections = 0;
    tb_loop_count(x->loop, response->new_connections, response->status > 0);
    if (code == CURLE_OK) {
        response->outcome = TB_PROXY_OK;
    } else if (x->too_large || code == CURLE_FILESIZE_EXCEEDED) {
        response->outcome = TB_PROXY_TOO_LARGE;
    } else if (x->refused && (code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_HOST)) {
        response->outcome = TB_PROXY_ADDRESS_REFUSED;
    } else if (x->switched) {
        return tb_transfer_end_as(x, TB_PROXY_FAILED, "the API switched protocols");
    } else if (x->conflicting_length) {
        return tb_transfer_end_as(x, TB_PROXY_FAILED, "the API's answer gave two lengths, or one that is not a number");
    } else if (code == CURLE_OPERATION_TIMEDOUT) {
        response->outcome = TB_PROXY_TIMEOUT;
    } else if (code == CURLE_RECV_ERROR && response->status > 0) {
        // The API answered (its status line was read) and the rest could not be: headers over
        // libcurl's bounds, a connection cut mid-answer. A broken answer, not an unreachable API.
        response->outcome = TB_PROXY_FAILED;
    } else if (code == CURLE_SSL_CONNECT_ERROR || code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CACERT_BADFILE) {
        response->outcome = TB_PROXY_TLS;
    } else if (code == CURLE_COULDNT_RESOLVE_HOST || code == CURLE_COULDNT_CONNECT || code == CURLE_SEND_ERROR ||
               code == CURLE_RECV_ERROR || code == CURLE_GOT_NOTHING) {
        response->outcome = TB_PROXY_UNREACHABLE;
    } else {
        response->outcome = TB_PROXY_FAILED;
    }
    if (code != CURLE_OK) {
        // libcurl's fixed text for the code only: its detailed message can quote the URL, whose
        // query may hold a secret the app put there.
        snprintf(response->error, sizeof response->error, "%s", curl_easy_strerror(code));
    }
    hand_over(x);
}
