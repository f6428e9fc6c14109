// The loop's connection keys (curl_internal.h's tb_key_table): connections are kept per key (the
// caller's — an API's pool, or one session's —, with the address policy, the schemes and the CA
// store). Each key has a libcurl share object holding its own connection cache
// (CURL_LOCK_DATA_CONNECT), so that a connection opened where private addresses were allowed never
// serves a call where they are not, nor one verified against one provider's CA another's; with
// it the key's TLS sessions (resumed by its new connections) and DNS answers. A key's connections
// close when it has been idle for a while or when the table is full and it is the least recently
// used idle one. Only the loop's thread uses a table (every libcurl call is made there), so the
// shares need no lock functions.

#include "curl_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

enum {
    // The policy and schemes (2), the CA store's address (16 hex digits), a space, a connection
    // key of at most 90 bytes and the NUL.
    KEY_SIZE = 2 + 16 + 1 + 90 + 1,
    // A key idle this long gives its connections up (libcurl reuses none older than 118 s).
    KEY_IDLE_MS = 120000,
};

struct tb_share {
    CURLSH *handle;
    char key[KEY_SIZE];
    int users;             // transfers running with it
    long long last_used_ms;
    tb_share *bucket_next; // in its hash bucket
    tb_share *newer, *older; // in the table's use order
};

void tb_keys_init(tb_key_table *table, int per_key) {
    memset(table, 0, sizeof *table);
    // The keys' connections stay within half the open-file limit (a key keeps up to `per_key`),
    // and within 4,096 keys.
    struct rlimit files;
    long budget = getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY ? (long)files.rlim_cur / 2 : 65536;
    long keys = budget / per_key;
    table->max = keys < 16 ? 16 : keys > 4096 ? 4096 : (int)keys;
}

static unsigned bucket_of(const char *key) {
    unsigned hash = 5381;
    for (const unsigned char *c = (const unsigned char *)key; *c; c++) hash = hash * 33 + *c;
    return hash % TB_KEY_BUCKETS;
}

static void unlink_use(tb_key_table *table, tb_share *share) {
    if (share->newer) share->newer->older = share->older; else table->newest = share->older;
    if (share->older) share->older->newer = share->newer; else table->oldest = share->newer;
    share->newer = share->older = NULL;
}

static void link_newest(tb_key_table *table, tb_share *share) {
    share->older = table->newest;
    share->newer = NULL;
    if (table->newest) table->newest->newer = share; else table->oldest = share;
    table->newest = share;
}

// Closes a key's connections and forgets it; only while no transfer uses it.
static void drop(tb_key_table *table, tb_share *share) {
    tb_share **link = &table->buckets[bucket_of(share->key)];
    while (*link != share) link = &(*link)->bucket_next;
    *link = share->bucket_next;
    unlink_use(table, share);
    curl_share_cleanup(share->handle);
    free(share);
    table->count -= 1;
}

tb_share *tb_keys_take(tb_key_table *table, const tb_proxy_request *request) {
    char key[KEY_SIZE];
    // A key that does not fit is refused, never cut short: two keys cut to the same text would
    // share connections.
    int length = snprintf(key, sizeof key, "%d%d%016" PRIxPTR " %s", request->allow_private_addresses, request->allow_http,
                          (uintptr_t)request->ca_store, request->connection_key);
    if (length < 0 || (size_t)length >= sizeof key) return NULL;
    unsigned bucket = bucket_of(key);
    tb_share *share = table->buckets[bucket];
    while (share && strcmp(share->key, key) != 0) share = share->bucket_next;
    if (share) {
        unlink_use(table, share);
    } else {
        // A full table gives up its least recently used idle key.
        if (table->count >= table->max) {
            tb_share *idle = table->oldest;
            while (idle && idle->users > 0) idle = idle->newer;
            if (idle) drop(table, idle);
        }
        share = calloc(1, sizeof *share);
        if (share == NULL) return NULL;
        share->handle = curl_share_init();
        if (share->handle == NULL || curl_share_setopt(share->handle, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) != CURLSHE_OK
            || curl_share_setopt(share->handle, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK
            || curl_share_setopt(share->handle, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) != CURLSHE_OK) {
            if (share->handle) curl_share_cleanup(share->handle);
            free(share);
            return NULL;
        }
        snprintf(share->key, sizeof share->key, "%s", key);
        share->bucket_next = table->buckets[bucket];
        table->buckets[bucket] = share;
        table->count += 1;
    }
    link_newest(table, share);
    share->users += 1;
    return share;
}

CURLSH *tb_share_handle(const tb_share *share) { return share->handle; }

void tb_keys_give_back(tb_share *share) {
    share->users -= 1;
    share->last_used_ms = tb_now_ms();
}

// Looked at once a second, every key (the use order is by a transfer's start, and a long one may
// end after later ones).
void tb_keys_upkeep(tb_key_table *table, long long now) {
    if (now - table->upkeep_ms < 1000) return;
    table->upkeep_ms = now;
    for (tb_share *share = table->oldest, *newer; share; share = newer) {
        newer = share->newer;
        if (share->users == 0 && now - share->last_used_ms > KEY_IDLE_MS) drop(table, share);
    }
}

void tb_keys_clear(tb_key_table *table) {
    while (table->oldest) drop(table, table->oldest);
}
