// The API proxy's event loop: one thread drives libcurl's multi interface for every transfer of
// its loop, so that a transfer holds no thread — a client that reads slowly pauses its transfer
// (libcurl's CURL_WRITEFUNC_PAUSE) instead of blocking one. Other threads hand work over through
// a short queue under `lock` (new transfers, resumes of paused ones) and wake the thread with
// curl_multi_wakeup() only when it sleeps in curl_multi_poll().
// Connections are kept per connection key, in the loop's key table (keys.c).

#define _GNU_SOURCE // pthread_setname_np

#include "curl_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { IDLE_HANDLES = 64 };

typedef struct {
    tb_transfer *head, *tail;
    int count;
} transfer_list;

struct tb_proxy_loop {
    // One for the loop's owner, one for its thread while it runs, one per paused transfer whose
    // sink may still call tb_proxy_resume(): the last one out frees the loop.
    atomic_int references;
    CURLM *multi;
    int max_in_flight;
    // Connections: opened and reused by transfers, and open now (kept or in use).
    atomic_llong opened, reused, open;
    tb_kept_sockets kept; // the thread's

    pthread_mutex_t lock; // guards the fields up to the next comment
    transfer_list incoming; // started, not yet taken by the thread
    uint64_t *resumes;
    size_t resume_count, resume_capacity;
    int admitted;  // started and not yet ended: at most twice max_in_flight
    int polling;   // the thread is in (or about to enter) curl_multi_poll: a hand-over wakes it
    int released;
    uint64_t next_tag;

    // The thread's own.
    transfer_list line;    // waiting for a place
    transfer_list running; // in the multi handle
    tb_key_table keys;
    CURL *idle[IDLE_HANDLES];
    int idle_count;
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

// MARK: references

void tb_loop_hold(tb_proxy_loop *loop) { atomic_fetch_add(&loop->references, 1); }

void tb_loop_drop(tb_proxy_loop *loop) {
    if (atomic_fetch_sub(&loop->references, 1) != 1) return;
    pthread_mutex_destroy(&loop->lock);
    free(loop->resumes);
    tb_kept_free(&loop->kept);
    free(loop);
}

// With `lock` held: wakes the thread if it sleeps in curl_multi_poll. Under the lock, so that
// the wake-up never reaches a multi handle the thread has cleaned up (wind_down).
static void wake_locked(tb_proxy_loop *loop) {
    if (!loop->polling || loop->multi == NULL) return;
    loop->polling = 0;
    curl_multi_wakeup(loop->multi);
}

// MARK: lists

static void list_append(transfer_list *list, tb_transfer *transfer) {
    transfer->next = NULL;
    transfer->previous = list->tail;
    if (list->tail) list->tail->next = transfer; else list->head = transfer;
    list->tail = transfer;
    list->count += 1;
}

static void list_remove(transfer_list *list, tb_transfer *transfer) {
    if (transfer->previous) transfer->previous->next = transfer->next; else list->head = transfer->next;
    if (transfer->next) transfer->next->previous = transfer->previous; else list->tail = transfer->previous;
    transfer->next = transfer->previous = NULL;
    list->count -= 1;
}

// MARK: running transfers

static CURL *take_easy(tb_proxy_loop *loop) {
    if (loop->idle_count > 0) return loop->idle[--loop->idle_count];
    return curl_easy_init();
}

// The handle of an ended transfer, out of the multi handle: kept for the next one, or closed.
static void give_back_easy(tb_proxy_loop *loop, CURL *easy) {
    // Its share goes now: curl_easy_reset keeps it, and a share in use cannot be cleaned up. A
    // handle that would not let it go is closed instead, which lets go of it.
    if (curl_easy_setopt(easy, CURLOPT_SHARE, NULL) == CURLE_OK && loop->idle_count < IDLE_HANDLES) {
        curl_easy_reset(easy);
        loop->idle[loop->idle_count++] = easy;
    } else {
        curl_easy_cleanup(easy);
    }
}

// Ends a transfer taken off the lists: its handle and key go back, its caller learns the outcome.
static void finish(tb_proxy_loop *loop, tb_transfer *transfer, CURLcode code, int outcome, const char *error) {
    CURL *easy = transfer->easy;
    tb_share *share = transfer->share;
    if (outcome >= 0) tb_transfer_end_as(transfer, outcome, error); else tb_transfer_end(transfer, code);
    if (easy) give_back_easy(loop, easy);
    if (share) tb_keys_give_back(share);
    pthread_mutex_lock(&loop->lock);
    loop->admitted -= 1;
    pthread_mutex_unlock(&loop->lock);
}

// Takes a running transfer out of the multi handle and ends it: one libcurl is done with, or one
// stopped short (a failed resume, the loop's end), whose connection libcurl then closes.
static void take_out(tb_proxy_loop *loop, tb_transfer *transfer, CURLcode code, int outcome, const char *error) {
    list_remove(&loop->running, transfer);
    curl_multi_remove_handle(loop->multi, transfer->easy);
    finish(loop, transfer, code, outcome, error);
}

// Moves transfers from the line into the multi handle while there is room.
static void admit(tb_proxy_loop *loop) {
    while (loop->line.head && loop->running.count < loop->max_in_flight) {
        tb_transfer *transfer = loop->line.head;
        list_remove(&loop->line, transfer);
        CURL *easy = take_easy(loop);
        tb_share *share = easy ? tb_keys_take(&loop->keys, &transfer->request) : NULL;
        if (share == NULL) {
            if (easy) give_back_easy(loop, easy);
            finish(loop, transfer, CURLE_OK, TB_PROXY_FAILED, "no connection key for the call (no memory, or a key over 90 bytes)");
            continue;
        }
        transfer->easy = easy;
        transfer->share = share;
        if (!tb_transfer_prepare(transfer, easy) || curl_easy_setopt(easy, CURLOPT_SHARE, tb_share_handle(share)) != CURLE_OK) {
            finish(loop, transfer, CURLE_OK, TB_PROXY_FAILED, "libcurl refused an option of the call");
            continue;
        }
        if (curl_multi_add_handle(loop->multi, easy) != CURLM_OK) {
            finish(loop, transfer, CURLE_OK, TB_PROXY_FAILED, "libcurl refused the call");
            continue;
        }
        list_append(&loop->running, transfer);
    }
}

// Transfers in the line past their deadline never start (busy). Returns the time to the next
// such deadline, or -1. (A running transfer's deadline is libcurl's CURLOPT_TIMEOUT_MS, which
// it checks for a paused transfer too.)
static long expire(tb_proxy_loop *loop, long long now) {
    long long next = -1;
    for (tb_transfer *transfer = loop->line.head, *after; transfer; transfer = after) {
        after = transfer->next;
        if (transfer->deadline_ms > now) {
            if (next < 0 || transfer->deadline_ms < next) next = transfer->deadline_ms;
            continue;
        }
        list_remove(&loop->line, transfer);
        finish(loop, transfer, CURLE_OK, TB_PROXY_BUSY, "");
    }
    return next < 0 ? -1 : (long)(next - now);
}

static void resume(tb_proxy_loop *loop, uint64_t tag) {
    for (tb_transfer *transfer = loop->running.head; transfer; transfer = transfer->next) {
        if (transfer->tag != tag) continue;
        if (!transfer->paused) return;
        transfer->paused = 0;
        // libcurl offers the bytes it kept at once, from inside this call.
        CURLcode code = curl_easy_pause(transfer->easy, CURLPAUSE_CONT);
        if (code != CURLE_OK) take_out(loop, transfer, code, -1, NULL);
        return;
    }
}

static void collect(tb_proxy_loop *loop) {
    int left;
    CURLMsg *message;
    while ((message = curl_multi_info_read(loop->multi, &left)) != NULL) {
        if (message->msg != CURLMSG_DONE) continue;
        tb_transfer *transfer = NULL;
        if (curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, (char **)&transfer) != CURLE_OK || transfer == NULL) {
            // Every handle the loop adds carries its transfer: this one is not the loop's.
            curl_multi_remove_handle(loop->multi, message->easy_handle);
            continue;
        }
        CURLcode code = message->data.result; // the message is gone once the handle is removed
        if (tb_transfer_retries_fresh(transfer, code)) {
            curl_multi_remove_handle(loop->multi, transfer->easy);
            if (curl_multi_add_handle(loop->multi, transfer->easy) == CURLM_OK) continue;
            list_remove(&loop->running, transfer);
            finish(loop, transfer, CURLE_OK, TB_PROXY_FAILED, "libcurl refused the call");
            continue;
        }
        take_out(loop, transfer, code, -1, NULL);
    }
}

// The loop is released: every transfer ends as failed, and the thread's libcurl state goes.
static void wind_down(tb_proxy_loop *loop, transfer_list *incoming) {
    tb_transfer *transfer;
    while ((transfer = incoming->head) != NULL) {
        list_remove(incoming, transfer);
        finish(loop, transfer, CURLE_OK, TB_PROXY_FAILED, "the proxy is stopping");
    }
    while ((transfer = loop->line.head) != NULL) {
        list_remove(&loop->line, transfer);
        finish(loop, transfer, CURLE_OK, TB_PROXY_FAILED, "the proxy is stopping");
    }
    while ((transfer = loop->running.head) != NULL) take_out(loop, transfer, CURLE_OK, TB_PROXY_FAILED, "the proxy is stopping");
    tb_keys_clear(&loop->keys);
    while (loop->idle_count > 0) curl_easy_cleanup(loop->idle[--loop->idle_count]);
    pthread_mutex_lock(&loop->lock);
    CURLM *multi = loop->multi;
    loop->multi = NULL;
    pthread_mutex_unlock(&loop->lock);
    curl_multi_cleanup(multi);
}

static void *run(void *argument) {
    tb_proxy_loop *loop = argument;
    pthread_setname_np(pthread_self(), "proxy-loop");
    uint64_t *resumes = NULL;
    size_t resume_capacity = 0;
    for (;;) {
        pthread_mutex_lock(&loop->lock);
        loop->polling = 0;
        transfer_list incoming = loop->incoming;
        loop->incoming = (transfer_list){0};
        // The two resume arrays change places: the thread reads one while others fill the other.
        uint64_t *taken = loop->resumes;
        size_t resume_count = loop->resume_count, taken_capacity = loop->resume_capacity;
        loop->resumes = resumes;
        loop->resume_capacity = resume_capacity;
        loop->resume_count = 0;
        int released = loop->released;
        pthread_mutex_unlock(&loop->lock);
        resumes = taken;
        resume_capacity = taken_capacity;
        if (released) {
            wind_down(loop, &incoming);
            break;
        }
        if (incoming.head) {
            if (loop->line.tail) {
                loop->line.tail->next = incoming.head;
                incoming.head->previous = loop->line.tail;
            } else {
                loop->line.head = incoming.head;
            }
            loop->line.tail = incoming.tail;
            loop->line.count += incoming.count;
        }
        for (size_t i = 0; i < resume_count; i++) resume(loop, resumes[i]);
        long long now = tb_now_ms();
        long deadline = expire(loop, now);
        admit(loop);
        int still_running;
        // A failing multi handle (out of memory) ends what runs in it, rather than leave it waiting.
        CURLMcode performed = curl_multi_perform(loop->multi, &still_running);
        while (performed != CURLM_OK && loop->running.head) {
            take_out(loop, loop->running.head, CURLE_OK, TB_PROXY_FAILED, curl_multi_strerror(performed));
        }
        collect(loop);
        int more = loop->line.head && loop->running.count < loop->max_in_flight;
        tb_keys_upkeep(&loop->keys, now);

        long wait = -1;
        curl_multi_timeout(loop->multi, &wait);
        if (wait < 0) wait = loop->keys.count > 0 ? 1000 : 60000;
        if (deadline >= 0 && deadline < wait) wait = deadline;
        if (more) wait = 0;
        pthread_mutex_lock(&loop->lock);
        if (loop->incoming.head || loop->resume_count > 0 || loop->released) wait = 0;
        loop->polling = wait > 0;
        pthread_mutex_unlock(&loop->lock);
        // Without a wait on the sockets, a short pause instead, so that the loop does not spin.
        struct timespec pause = {0, 10 * 1000 * 1000};
        if (wait > 0 && curl_multi_poll(loop->multi, NULL, 0, (int)wait, NULL) != CURLM_OK) nanosleep(&pause, NULL);
    }
    free(resumes);
    tb_loop_drop(loop);
    return NULL;
}

// MARK: the boundary

tb_proxy_loop *tb_proxy_loop_create(int max_in_flight) {
    pthread_once(&init_once, init);
    tb_proxy_loop *loop = calloc(1, sizeof *loop);
    if (loop == NULL) return NULL;
    if (!tb_kept_init(&loop->kept)) {
        free(loop);
        return NULL;
    }
    loop->multi = curl_multi_init();
    // A key keeps as many connections as the loop runs transfers: a pool every session shares
    // keeps what a burst opened, rather than closing and opening connections under load.
    int per_key = max_in_flight > 0 ? max_in_flight : 1;
    if (loop->multi == NULL || curl_multi_setopt(loop->multi, CURLMOPT_MAXCONNECTS, (long)per_key) != CURLM_OK) {
        if (loop->multi) curl_multi_cleanup(loop->multi);
        tb_kept_free(&loop->kept);
        free(loop);
        return NULL;
    }
    atomic_init(&loop->references, 2); // the caller's, and the thread's
    loop->max_in_flight = max_in_flight > 0 ? max_in_flight : 1;
    pthread_mutex_init(&loop->lock, NULL);
    tb_keys_init(&loop->keys, per_key);
    // The thread runs from the start: a loop that cannot have one is no loop, and its owner
    // fails to start rather than the process aborting at its first call.
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    int failed = pthread_create(&thread, &attributes, run, loop) != 0;
    pthread_attr_destroy(&attributes);
    if (failed) {
        tb_keys_clear(&loop->keys);
        curl_multi_cleanup(loop->multi);
        pthread_mutex_destroy(&loop->lock);
        tb_kept_free(&loop->kept);
        free(loop);
        return NULL;
    }
    return loop;
}

void tb_proxy_loop_release(tb_proxy_loop *loop) {
    pthread_mutex_lock(&loop->lock);
    loop->released = 1;
    wake_locked(loop);
    pthread_mutex_unlock(&loop->lock);
    tb_loop_drop(loop);
}

void tb_loop_count(tb_proxy_loop *loop, long new_connections, int answered) {
    if (new_connections > 0) atomic_fetch_add(&loop->opened, new_connections);
    else if (answered) atomic_fetch_add(&loop->reused, 1);
}

void tb_loop_socket(tb_proxy_loop *loop, int opened) { atomic_fetch_add(&loop->open, opened ? 1 : -1); }

tb_kept_sockets *tb_loop_kept(tb_proxy_loop *loop) { return &loop->kept; }

tb_proxy_connections tb_proxy_loop_connections(tb_proxy_loop *loop) {
    return (tb_proxy_connections){atomic_load(&loop->opened), atomic_load(&loop->reused), atomic_load(&loop->open)};
}

int tb_proxy_start(tb_proxy_loop *loop, const tb_proxy_request *request) {
    pthread_mutex_lock(&loop->lock);
    int room = !loop->released && loop->admitted < 2 * loop->max_in_flight;
    if (room) loop->admitted += 1;
    uint64_t tag = ++loop->next_tag;
    pthread_mutex_unlock(&loop->lock);
    if (!room) return 0;
    tb_transfer *transfer = tb_transfer_copy(request, loop, tag);
    pthread_mutex_lock(&loop->lock);
    if (transfer == NULL || loop->released) {
        loop->admitted -= 1;
        pthread_mutex_unlock(&loop->lock);
        free(transfer ? transfer->owned : NULL);
        free(transfer);
        return 0;
    }
    list_append(&loop->incoming, transfer);
    wake_locked(loop);
    pthread_mutex_unlock(&loop->lock);
    return 1;
}

void tb_proxy_resume(void *context, uint64_t tag) {
    tb_proxy_loop *loop = context;
    pthread_mutex_lock(&loop->lock);
    if (loop->resume_count == loop->resume_capacity) {
        size_t wanted = loop->resume_capacity ? loop->resume_capacity * 2 : 16;
        uint64_t *grown = realloc(loop->resumes, wanted * sizeof *grown);
        if (grown) {
            loop->resumes = grown;
            loop->resume_capacity = wanted;
        }
    }
    // Without memory to note it the transfer stays paused until its deadline ends it.
    if (loop->resume_count < loop->resume_capacity) loop->resumes[loop->resume_count++] = tag;
    wake_locked(loop);
    pthread_mutex_unlock(&loop->lock);
    tb_loop_drop(loop);
}
