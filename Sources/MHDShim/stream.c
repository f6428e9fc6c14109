// Streamed answers: a response whose body a producer writes while libmicrohttpd sends it
// (include/mhd_shim.h, tb_stream_*). libmicrohttpd asks for bytes through a content reader; when
// none are buffered yet, the reader suspends the connection and returns 0 (what microhttpd.h
// prescribes: 0 alone would busy-loop the polling thread), and the producer resumes it when it
// has written more or finished. The producer never waits: bytes that do not fit are refused and
// the producer's waker called once they do (backpressure without a blocked thread: the API
// proxy's loop pauses the transfer meanwhile, up to its deadline).
// Streams whose response libmicrohttpd holds are listed with the server whose connection sends
// them (tb_stream_list), so that stopping a server ends its own streams — and no other server's —
// before stopping its daemon, which aborts on a suspended connection. The lock order is written
// down in shim_internal.h.
#include "shim_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

struct tb_stream {
    pthread_mutex_t lock;
    uint8_t *buffer;
    size_t capacity;
    size_t start;  // first buffered byte
    size_t length; // buffered bytes
    int finished;  // the producer is done (ok tells how)
    int ok;
    int abandoned;  // libmicrohttpd freed the response: nobody reads any more
    int suspended;  // the reader suspended the connection, waiting for bytes
    struct MHD_Connection *connection;
    int references; // the producer's and the response's
    uint64_t sent;  // body bytes libmicrohttpd took
    tb_stream_ended ended; // called once libmicrohttpd is done with the response
    void *ended_context;
    // A producer waiting for room for `wanted` bytes: called once, with no stream lock held.
    tb_stream_waker wake;
    void *wake_context;
    uint64_t wake_tag;
    size_t wanted;
    // The server whose list holds it, from tb_stream_attach(); NULL until then. Its links are
    // guarded by the list's lock.
    tb_server *server;
    tb_stream *next, *previous;
};

void tb_stream_list_init(tb_stream_list *list) {
    pthread_mutex_init(&list->lock, NULL);
    pthread_cond_init(&list->changed, NULL);
    list->head = NULL;
    list->count = 0;
    list->ending = 0;
}

void tb_stream_list_destroy(tb_stream_list *list) {
    pthread_cond_destroy(&list->changed);
    pthread_mutex_destroy(&list->lock);
}

static void release(tb_stream *stream) {
    pthread_mutex_lock(&stream->lock);
    int remaining = --stream->references;
    pthread_mutex_unlock(&stream->lock);
    if (remaining > 0) return;
    pthread_mutex_destroy(&stream->lock);
    free(stream->buffer);
    free(stream);
}

tb_stream *tb_stream_create(size_t capacity) {
    tb_stream *stream = calloc(1, sizeof(tb_stream));
    if (stream == NULL) return NULL;
    stream->buffer = malloc(capacity);
    if (stream->buffer == NULL) {
        free(stream);
        return NULL;
    }
    stream->capacity = capacity;
    stream->references = 2;
    pthread_mutex_init(&stream->lock, NULL);
    return stream;
}

typedef struct {
    tb_stream_waker wake;
    void *context;
    uint64_t tag;
} waker;

// With the stream's lock held: the producer's waker, taken to be called once the lock is dropped.
static waker take_waker(tb_stream *stream) {
    waker taken = {stream->wake, stream->wake_context, stream->wake_tag};
    stream->wake = NULL;
    return taken;
}

static void call(waker taken) {
    if (taken.wake != NULL) taken.wake(taken.context, taken.tag);
}

// With the stream's lock held: let a reader waiting in a suspended connection go on.
static void wake_reader(tb_stream *stream) {
    if (stream->suspended && stream->connection != NULL) {
        stream->suspended = 0;
        MHD_resume_connection(stream->connection);
    }
}

int tb_stream_offer(tb_stream *stream, const void *data, size_t length, tb_stream_waker wake, void *context, uint64_t tag) {
    pthread_mutex_lock(&stream->lock);
    int result;
    if (stream->abandoned || stream->finished || length > stream->capacity) {
        result = TB_STREAM_CLOSED;
    } else if (stream->capacity - stream->length < length) {
        stream->wake = wake;
        stream->wake_context = context;
        stream->wake_tag = tag;
        stream->wanted = length;
        result = TB_STREAM_FULL;
    } else {
        if (stream->start + stream->length + length > stream->capacity) {
            memmove(stream->buffer, stream->buffer + stream->start, stream->length);
            stream->start = 0;
        }
        memcpy(stream->buffer + stream->start + stream->length, data, length);
        stream->length += length;
        wake_reader(stream);
        result = TB_STREAM_TAKEN;
    }
    pthread_mutex_unlock(&stream->lock);
    return result;
}

void tb_stream_finish(tb_stream *stream, int ok) {
    pthread_mutex_lock(&stream->lock);
    if (!stream->finished) {
        stream->finished = 1;
        stream->ok = ok;
    }
    wake_reader(stream);
    waker pending = take_waker(stream); // the producer gives up waiting: its waker is still owed one call
    pthread_mutex_unlock(&stream->lock);
    call(pending);
    release(stream);
}

static ssize_t read_stream(void *cls, uint64_t position, char *buffer, size_t max) {
    (void)position;
    tb_stream *stream = cls;
    pthread_mutex_lock(&stream->lock);
    ssize_t result;
    waker room = {0};
    if (stream->length > 0) {
        size_t chunk = stream->length < max ? stream->length : max;
        memcpy(buffer, stream->buffer + stream->start, chunk);
        stream->sent += chunk;
        stream->start += chunk;
        stream->length -= chunk;
        if (stream->length == 0) stream->start = 0;
        // The producer goes on once half the buffer is free (and its bytes fit): not at every
        // chunk the client takes, which would wake it for each few kilobytes.
        size_t room_wanted = stream->wanted > stream->capacity / 2 ? stream->wanted : stream->capacity / 2;
        if (stream->wake != NULL && stream->capacity - stream->length >= room_wanted) room = take_waker(stream);
        result = (ssize_t)chunk;
    } else if (stream->finished) {
        result = stream->ok ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
    } else {
        // Nothing yet: park the connection until the producer writes or finishes.
        stream->suspended = 1;
        MHD_suspend_connection(stream->connection);
        result = 0;
    }
    pthread_mutex_unlock(&stream->lock);
    call(room);
    return result;
}

// libmicrohttpd is done with the response (sent, its connection closed, or never queued): the
// stream leaves the list its server's stop waits on; the producer may still hold it until it
// finishes.
static void free_stream(void *cls) {
    tb_stream *stream = cls;
    // Set on a server thread before the response was queued, which happened before this call.
    tb_server *server = stream->server;
    if (server != NULL) {
        tb_stream_list *list = &server->streams;
        pthread_mutex_lock(&list->lock);
        if (stream->previous) stream->previous->next = stream->next; else list->head = stream->next;
        if (stream->next) stream->next->previous = stream->previous;
        list->count -= 1;
        pthread_cond_broadcast(&list->changed);
        pthread_mutex_unlock(&list->lock);
    }
    pthread_mutex_lock(&stream->lock);
    stream->abandoned = 1;
    stream->connection = NULL;
    waker gone = take_waker(stream);
    tb_stream_ended ended = stream->ended;
    void *ended_context = stream->ended_context;
    uint64_t sent = stream->sent;
    pthread_mutex_unlock(&stream->lock);
    call(gone);
    if (ended != NULL) ended(ended_context, sent);
    release(stream);
}

void tb_stream_abandon(tb_stream *stream) { free_stream(stream); }

void tb_stream_when_ended(tb_stream *stream, tb_stream_ended ended, void *context) {
    pthread_mutex_lock(&stream->lock);
    stream->ended = ended;
    stream->ended_context = context;
    pthread_mutex_unlock(&stream->lock);
}

tb_response *tb_response_create_stream(unsigned int status, tb_stream *stream) {
    tb_response *response = calloc(1, sizeof(tb_response));
    if (response == NULL) return NULL;
    response->status = status;
    response->stream = stream;
    response->mhd = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, read_stream, stream, free_stream);
    if (response->mhd == NULL) {
        free(response);
        free_stream(stream); // the response's hold on it
        return NULL;
    }
    return response;
}

void tb_stream_attach(tb_stream *stream, tb_server *server, struct MHD_Connection *connection) {
    tb_stream_list *list = &server->streams;
    pthread_mutex_lock(&list->lock);
    stream->server = server;
    stream->previous = NULL;
    stream->next = list->head;
    if (list->head) list->head->previous = stream;
    list->head = stream;
    list->count += 1;
    int ending = list->ending;
    pthread_mutex_unlock(&list->lock);
    pthread_mutex_lock(&stream->lock);
    stream->connection = connection;
    // Queued after the server began to end its streams (an answer claimed just before): broken
    // off now, so that its reader never suspends the connection under a stopping daemon.
    waker ended = {0};
    if (ending && !stream->finished) {
        stream->finished = 1;
        stream->ok = 0;
        ended = take_waker(stream);
    }
    pthread_mutex_unlock(&stream->lock);
    call(ended);
}

void tb_streams_end(tb_server *server, unsigned int wait_ms) {
    tb_stream_list *list = &server->streams;
    pthread_mutex_lock(&list->lock);
    list->ending = 1;
    for (tb_stream *stream = list->head; stream != NULL; stream = stream->next) {
        pthread_mutex_lock(&stream->lock);
        if (!stream->finished) {
            stream->finished = 1;
            stream->ok = 0;
        }
        wake_reader(stream);
        waker ended = take_waker(stream);
        pthread_mutex_unlock(&stream->lock);
        call(ended);
    }
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += wait_ms / 1000;
    deadline.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec += 1;
        deadline.tv_nsec -= 1000000000L;
    }
    while (list->count > 0) {
        if (pthread_cond_timedwait(&list->changed, &list->lock, &deadline) != 0) break;
    }
    pthread_mutex_unlock(&list->lock);
}
