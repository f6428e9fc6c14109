// The API proxy's event loop: one thread drives libcurl's multi interface for every transfer of
// its loop, so that a transfer holds no thread — a client that reads slowly pauses its transfer
// (libcurl's CURL_WRITEFUNC_PAUSE) instead of blocking one. Other threads hand work over through
// a short queue under `lock` (new transfers, resumes of paused ones) and wake the thread with
// curl_multi_wakeup() only when it sleeps in curl_multi_poll().
//
// Connections are kept per connection key (the session's, with the address policy and schemes):
// each key has a libcurl share object holding its own connection cache (CURL_LOCK_DATA_CONNECT),
// so that bytes an API sent after one session's answer are never read as another session's, and
// a connection opened where private addresses were allowed never serves a call where they are
// not. A key's connections close when it has been idle for a while or when the table of keys is
// full and it is the least recently used one. Every libcurl call is made on the loop's thread, so
// the shares need no lock functions.

#define _GNU_SOURCE // pthread_setname_np

#include "curl_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

enum {
    KEY_SIZE = 96,
    SHARE_BUCKETS = 1024,
    // Connections a key keeps once its transfers end (libcurl's CURLMOPT_MAXCONNECTS, which
    // applies per share and counts connections in use too).
    CONNECTIONS_PER_KEY = 4,
    // A key idle this long gives its connections up (libcurl reuses none older than 118 s).
    KEY_IDLE_MS = 120000,
    IDLE_HANDLES = 64,
};

struct tb_share {
    CURLSH *handle;
    char key[KEY_SIZE];
    int users;             // transfers running with it
    long long last_used_ms;
    tb_share *bucket_next; // in its hash bucket
    tb_share *newer, *older; // in the loop's use order
};

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

    pthread_mutex_t lock; // guards the fields up to the next comment
    transfer_list incoming; // started, not yet taken by the thread
    uint64_t *resumes;
    size_t resume_count, resume_capacity;
    int admitted;  // started and not yet ended: at most twice max_in_flight
    int polling;   // the thread is in (or about to enter) curl_multi_poll: a hand-over wakes it
    int released;
    int started;
    uint64_t next_tag;

    // The thread's own.
    transfer_list line;    // waiting for a place
    transfer_list running; // in the multi handle
    tb_share *buckets[SHARE_BUCKETS];
    tb_share *newest, *oldest;
    int share_count, max_shares;
    long long upkeep_ms;
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

// MARK: the keys' shares

static unsigned bucket_of(const char *key) {
    unsigned hash = 5381;
    for (const unsigned char *c = (const unsigned char *)key; *c; c++) hash = hash * 33 + *c;
    return hash % SHARE_BUCKETS;
}

static void unlink_use(tb_proxy_loop *loop, tb_share *share) {
    if (share->newer) share->newer->older = share->older; else loop->newest = share->older;
    if (share->older) share->older->newer = share->newer; else loop->oldest = share->newer;
    share->newer = share->older = NULL;
}

static void link_newest(tb_proxy_loop *loop, tb_share *share) {
    share->older = loop->newest;
    share->newer = NULL;
    if (loop->newest) loop->newest->newer = share; else loop->oldest = share;
    loop->newest = share;
}

// Closes a key's connections and forgets it; only while no transfer uses it.
static void drop_share(tb_proxy_loop *loop, tb_share *share) {
    tb_share **link = &loop->buckets[bucket_of(share->key)];
    while (*link != share) link = &(*link)->bucket_next;
    *link = share->bucket_next;
    unlink_use(loop, share);
    curl_share_cleanup(share->handle);
    free(share);
    loop->share_count -= 1;
}

// The key's share, made when missing; NULL when libcurl or memory refused.
static tb_share *share_for(tb_proxy_loop *loop, const char *key) {
    unsigned bucket = bucket_of(key);
    for (tb_share *share = loop->buckets[bucket]; share; share = share->bucket_next) {
        if (strcmp(share->key, key) != 0) continue;
        unlink_use(loop, share);
        link_newest(loop, share);
        return share;
    }
    // A full table gives up its least recently used idle key.
    if (loop->share_count >= loop->max_shares) {
        for (tb_share *share = loop->oldest; share; share = share->newer) {
            if (share->users > 0) continue;
            drop_share(loop, share);
            break;
        }
    }
    tb_share *share = calloc(1, sizeof *share);
    if (share == NULL) return NULL;
    share->handle = curl_share_init();
    if (share->handle == NULL || curl_share_setopt(share->handle, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) != CURLSHE_OK) {
        if (share->handle) curl_share_cleanup(share->handle);
        free(share);
        return NULL;
    }
    snprintf(share->key, sizeof share->key, "%s", key);
    share->bucket_next = loop->buckets[bucket];
    loop->buckets[bucket] = share;
    link_newest(loop, share);
    loop->share_count += 1;
    return share;
}

// Keys idle for KEY_IDLE_MS give their connections up; looked at once a second, all of them (the
// use order is by a transfer's start, and a long one may end after later ones).
static void upkeep(tb_proxy_loop *loop, long long now) {
    if (now - loop->upkeep_ms < 1000) return;
    loop->upkeep_ms = now;
    for (tb_share *share = loop->oldest, *newer; share; share = newer) {
        newer = share->newer;
        if (share->users == 0 && now - share->last_used_ms > KEY_IDLE_MS) drop_share(loop, share);
    }
}

// MARK: running transfers

static CURL *take_easy(tb_proxy_loop *loop) {
    if (loop->idle_count > 0) return loop->idle[--loop->idle_count];
    return curl_easy_init();
}

// The handle of an ended transfer, out of the multi handle: kept for the next one, or closed.
static void give_back_easy(tb_proxy_loop *loop, CURL *easy) {
    // Its share goes now: curl_easy_reset keeps it, and a share in use cannot be cleaned up.
    curl_easy_setopt(easy, CURLOPT_SHARE, NULL);
    if (loop->idle_count < IDLE_HANDLES) {
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
    if (share) {
        share->users -= 1;
        share->last_used_ms = tb_now_ms();
    }
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
        char key[KEY_SIZE];
        snprintf(key, sizeof key, "%d%d %s", transfer->request.allow_private_addresses, transfer->request.allow_http,
                 transfer->request.connection_key);
        CURL *easy = take_easy(loop);
        tb_share *share = easy ? share_for(loop, key) : NULL;
        if (share == NULL) {
            if (easy) give_back_easy(loop, easy);
            finish(loop, transfer, CURLE_OK, TB_PROXY_FAILED, "no memory for the call");
            continue;
        }
        transfer->easy = easy;
        if (!tb_transfer_prepare(transfer, easy) || curl_easy_setopt(easy, CURLOPT_SHARE, share->handle) != CURLE_OK) {
            finish(loop, transfer, CURLE_OK, TB_PROXY_FAILED, "libcurl refused an option of the call");
            continue;
        }
        transfer->share = share;
        share->users += 1;
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
        curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, (char **)&transfer);
        CURLcode code = message->data.result; // the message is gone once the handle is removed
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
    while (loop->oldest) drop_share(loop, loop->oldest);
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
        curl_multi_perform(loop->multi, &still_running);
        collect(loop);
        int more = loop->line.head && loop->running.count < loop->max_in_flight;
        upkeep(loop, now);

        long wait = -1;
        curl_multi_timeout(loop->multi, &wait);
        if (wait < 0) wait = loop->share_count > 0 ? 1000 : 60000;
        if (deadline >= 0 && deadline < wait) wait = deadline;
        if (more) wait = 0;
        pthread_mutex_lock(&loop->lock);
        if (loop->incoming.head || loop->resume_count > 0 || loop->released) wait = 0;
        loop->polling = wait > 0;
        pthread_mutex_unlock(&loop->lock);
        if (wait > 0) curl_multi_poll(loop->multi, NULL, 0, (int)wait, NULL);
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
    loop->multi = curl_multi_init();
    if (loop->multi == NULL || curl_multi_setopt(loop->multi, CURLMOPT_MAXCONNECTS, (long)CONNECTIONS_PER_KEY) != CURLM_OK) {
        if (loop->multi) curl_multi_cleanup(loop->multi);
        free(loop);
        return NULL;
    }
    atomic_init(&loop->references, 1);
    loop->max_in_flight = max_in_flight > 0 ? max_in_flight : 1;
    pthread_mutex_init(&loop->lock, NULL);
    // The keys' idle connections stay within half the open-file limit (a key keeps up to
    // CONNECTIONS_PER_KEY), and within 4,096 keys.
    struct rlimit files;
    long budget = getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY ? (long)files.rlim_cur / 2 : 65536;
    long keys = budget / CONNECTIONS_PER_KEY;
    loop->max_shares = keys < 16 ? 16 : keys > 4096 ? 4096 : (int)keys;
    return loop;
}

void tb_proxy_loop_release(tb_proxy_loop *loop) {
    pthread_mutex_lock(&loop->lock);
    loop->released = 1;
    int started = loop->started;
    wake_locked(loop);
    pthread_mutex_unlock(&loop->lock);
    if (!started) curl_multi_cleanup(loop->multi); // no thread, and none will start
    tb_loop_drop(loop);
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
    int start = !loop->started;
    loop->started = 1;
    wake_locked(loop);
    pthread_mutex_unlock(&loop->lock);
    if (start) {
        tb_loop_hold(loop);
        pthread_attr_t attributes;
        pthread_attr_init(&attributes);
        pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
        pthread_t thread;
        if (pthread_create(&thread, &attributes, run, loop) != 0) abort(); // no thread to run any transfer
        pthread_attr_destroy(&attributes);
    }
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
