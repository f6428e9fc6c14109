// A request's side of the shim: what Swift reads of a request, the responses it builds, and
// answering now or later (include/mhd_shim.h).
#include "shim_internal.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

uint64_t tb_monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

void tb_request_release(tb_request *request) {
    pthread_mutex_lock(&request->lock);
    int remaining = --request->references;
    pthread_mutex_unlock(&request->lock);
    if (remaining > 0) return;
    if (request->pending != NULL) request->server->callbacks.drop_answer(request->server->context, request->pending);
    pthread_mutex_destroy(&request->lock);
    free(request->body);
    free(request);
}

enum MHD_Result tb_queue(tb_request *request, tb_response *response) {
    if (request->direct) {
        request->responded = tb_answer_directly(request, response);
        return request->responded ? MHD_YES : MHD_NO;
    }
    if (response->stream != NULL) tb_stream_attach(response->stream, request->server, request->connection);
    enum MHD_Result result =
        MHD_queue_response(request->connection, response->status, response->mhd);
    // Only a queued answer counts: otherwise the handler returns MHD_NO and the connection closes.
    request->responded = result == MHD_YES;
    tb_response_free(response);
    return result;
}

enum MHD_Result tb_queue_pending(tb_request *request, void *answer) {
    if (answer == NULL) return MHD_NO;
    tb_response *response = request->server->callbacks.build_answer(request->server->context, answer);
    // No response (no memory for one): close rather than hang.
    return response != NULL ? tb_queue(request, response) : MHD_NO;
}

const char *tb_request_method(const tb_request *request) { return request->method; }

const char *tb_request_target(const tb_request *request) { return request->target; }

const char *tb_request_header(const tb_request *request, const char *name) {
    return MHD_lookup_connection_value(request->connection, MHD_HEADER_KIND, name);
}

typedef struct {
    const char *name;
    char *buffer;
    size_t size;
    size_t length; // of the whole join, including what did not fit
    int seen;      // a value was joined (an empty one too)
} tb_join;

static void tb_join_append(tb_join *join, const char *text, size_t length) {
    if (join->length < join->size) {
        size_t room = join->size - 1 - join->length;
        memcpy(join->buffer + join->length, text, length < room ? length : room);
    }
    join->length += length;
}

static enum MHD_Result tb_join_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value) {
    (void)kind;
    tb_join *join = cls;
    if (value == NULL || strcasecmp(key, join->name) != 0) return MHD_YES;
    if (join->seen) tb_join_append(join, ", ", 2);
    join->seen = 1;
    tb_join_append(join, value, strlen(value));
    return MHD_YES;
}

size_t tb_request_header_joined(const tb_request *request, const char *name, char *buffer, size_t size) {
    if (size == 0) return 0;
    tb_join join = {name, buffer, size, 0, 0};
    MHD_get_connection_values(request->connection, MHD_HEADER_KIND, tb_join_header, &join);
    buffer[join.length < size ? join.length : size - 1] = '\0';
    return join.length;
}

const uint8_t *tb_request_body(const tb_request *request, size_t *length) {
    *length = request->body_length;
    return request->body;
}

size_t tb_request_header_bytes(const tb_request *request) { return request->header_bytes; }

tb_limit tb_request_limit(const tb_request *request) { return request->limit; }

const char *tb_request_problem(const tb_request *request) { return request->problem; }

int tb_request_client_ip(const tb_request *request, char *buffer, size_t size) {
    if (size < sizeof request->client_ip) return 0;
    memcpy(buffer, request->client_ip, sizeof request->client_ip);
    return buffer[0] != '\0';
}

uint64_t tb_request_start_ns(const tb_request *request) { return request->start_ns; }

tb_response *tb_response_create(unsigned int status, const void *body, size_t length) {
    tb_response *response = malloc(sizeof(tb_response));
    if (response == NULL) return NULL;
    // A copy that the response owns (MUST_FREE), and that tb_answer_directly() can still read.
    uint8_t *copy = NULL;
    if (length > 0) {
        copy = malloc(length);
        if (copy == NULL) {
            free(response);
            return NULL;
        }
        memcpy(copy, body, length);
    }
    response->status = status;
    response->body = copy;
    response->length = length;
    response->stream = NULL;
    response->mhd = MHD_create_response_from_buffer(
        length, copy, copy != NULL ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (response->mhd == NULL) {
        free(copy);
        free(response);
        return NULL;
    }
    return response;
}

// Never called: a response made by tb_response_create_head() answers a HEAD, which has no body.
static ssize_t tb_no_body(void *context, uint64_t position, char *buffer, size_t size) {
    (void)context, (void)position, (void)buffer, (void)size;
    return MHD_CONTENT_READER_END_WITH_ERROR;
}

tb_response *tb_response_create_head(unsigned int status, uint64_t length) {
    tb_response *response = malloc(sizeof(tb_response));
    if (response == NULL) return NULL;
    response->status = status;
    response->body = NULL;
    response->length = 0;
    response->stream = NULL;
    // libmicrohttpd announces the size in Content-Length and sends no body to a HEAD.
    response->mhd = MHD_create_response_from_callback(length, 1, tb_no_body, NULL, NULL); // no buffer needed
    if (response->mhd == NULL) {
        free(response);
        return NULL;
    }
    return response;
}

int tb_response_add_header(tb_response *response, const char *name, const char *value) {
    return MHD_add_response_header(response->mhd, name, value) == MHD_YES;
}

int tb_response_close_connection(tb_response *response) {
    return MHD_add_response_header(response->mhd, MHD_HTTP_HEADER_CONNECTION, "close") == MHD_YES;
}

void tb_response_free(tb_response *response) {
    MHD_destroy_response(response->mhd);
    free(response);
}

int tb_request_respond(tb_request *request, tb_response *response) {
    if (response == NULL) return 0; // no memory for a response: the connection gets closed
    return tb_queue(request, response) == MHD_YES;
}

void tb_request_defer(tb_request *request) {
    pthread_mutex_lock(&request->lock);
    request->deferred = 1;
    request->references += 1;
    pthread_mutex_unlock(&request->lock);
}

void tb_request_complete(tb_request *request, void *answer) {
    tb_server *server = request->server;
    pthread_mutex_lock(&request->lock);
    request->pending = answer;
    request->completed = 1;
    int suspended = request->suspended;
    request->suspended = 0;
    // Counted before the unlock: from then on the request can be answered and end, and the
    // server stopped (tb_server_stop waits until no resume is under way).
    if (suspended) __atomic_add_fetch(&server->resuming, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&request->lock);
    // Resumed after the unlock: resuming wakes the connection's thread, whose first step is to
    // take this lock. The suspend it undoes is done (`suspended` is set after it).
    if (suspended) {
        MHD_resume_connection(request->connection);
        __atomic_sub_fetch(&server->resuming, 1, __ATOMIC_SEQ_CST);
    }
    tb_request_release(request);
}

void tb_wait_for_resumes(tb_server *server) {
    while (__atomic_load_n(&server->resuming, __ATOMIC_SEQ_CST) > 0) sched_yield();
}
