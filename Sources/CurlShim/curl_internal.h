// What the CurlShim's files share. Not part of the boundary (include/curl_shim.h is).
//
// The locks and their order: a transfer's callbacks run on the loop's thread with no lock of the
// loop held; tb_proxy_loop.lock is innermost — taken by tb_proxy_start and tb_proxy_resume, which
// a body sink's reader calls holding its own locks (MHDShim's stream.c: the stream list's lock,
// libmicrohttpd's response mutex), and nothing is taken while it is held (curl_multi_wakeup, called
// under it so that it never meets a cleaned-up multi handle, only writes to libcurl's socketpair).
#ifndef TB_CURL_INTERNAL_H
#define TB_CURL_INTERNAL_H

#include "curl_shim.h"

#include <curl/curl.h>
#include <sys/socket.h>

typedef struct tb_share tb_share;

enum {
    TB_KEY_BUCKETS = 1024,
};

// A loop's connection keys, each with its libcurl share (keys.c); the loop's thread's own.
typedef struct {
    tb_share *buckets[TB_KEY_BUCKETS];
    tb_share *newest, *oldest; // the use order
    int count, max;
    long long upkeep_ms;
} tb_key_table;

// `per_key`: the connections a key keeps once its transfers end (libcurl's CURLMOPT_MAXCONNECTS,
// which applies per share and counts connections in use too).
void tb_keys_init(tb_key_table *table, int per_key);
// The share of `request`'s key (its connection key, address policy and schemes), made when
// missing, held for one transfer until tb_keys_give_back(); NULL when libcurl or memory refused,
// or when the connection key is longer than 90 bytes (a session id's hex is 64).
tb_share *tb_keys_take(tb_key_table *table, const tb_proxy_request *request);
CURLSH *tb_share_handle(const tb_share *share);
void tb_keys_give_back(tb_share *share);
// Keys idle for a while give their connections up.
void tb_keys_upkeep(tb_key_table *table, long long now);
// Every key's connections closed (none may be in use).
void tb_keys_clear(tb_key_table *table);

// One transfer, from tb_proxy_start() to its on_done (transfer.c): its own copy of the request,
// its libcurl handle while it runs, the answer as it arrives.
typedef struct tb_transfer {
    tb_proxy_request request; // its strings, header lines and body point into `owned`
    char *owned;
    tb_proxy_loop *loop;
    uint64_t tag;
    long long deadline_ms; // on the monotonic clock
    CURL *easy;
    struct curl_slist *header_list;
    tb_share *share; // whose connections it uses (keys.c)
    tb_proxy_response response;
    size_t headers_capacity;
    size_t body_capacity;
    size_t streamed_bytes;
    int refused;   // the address policy refused an address
    int too_large;
    int switched;  // a 101: the connection would speak something else
    int has_length;         // the answer's head gave a Content-Length, `length`
    long long length;
    int conflicting_length; // and another, or one that is not a number: the answer cannot be framed
    int paused;    // its sink had no room: waiting for tb_proxy_resume (or its deadline)
    int head_done;
    int final_head_ended; // the final answer's head has ended: header lines now are trailers
    int stale;     // the kept connection it was given had bytes waiting or was closed: retried on a new one
    int retried;
    curl_socket_t opened[4]; // the sockets it opened, the last four (happy eyeballs opens two)
    int opened_count;
    struct tb_transfer *next; // in the loop's lists
    struct tb_transfer *previous;
} tb_transfer;

long long tb_now_ms(void);

// Has `easy` verify its TLS connections against `store` (castore.c); 0 when libcurl refused.
int tb_ca_store_use(const tb_ca_store *store, CURL *easy);

// Whether the address policy refuses the address (policy.c).
int tb_refused_sockaddr(const struct sockaddr *address);

// A reference to the loop (loop.c): its thread's, or a paused transfer's until its sink calls
// tb_proxy_resume(), which drops it. The last one dropped frees the loop.
void tb_loop_hold(tb_proxy_loop *loop);
void tb_loop_drop(tb_proxy_loop *loop);
// Counts an ended transfer's connections: those it opened, or its reuse of a kept one.
void tb_loop_count(tb_proxy_loop *loop, long new_connections, int answered);
// A socket of the loop's opened (1) or closed (0).
void tb_loop_socket(tb_proxy_loop *loop, int opened);
// The sockets of connections kept for reuse, by local port (kept.c): what libcurl tells a
// transfer about the connection it is given is its addresses. The loop's thread only.
typedef struct {
    long port;
    curl_socket_t socket;
} tb_kept_socket;
typedef struct {
    curl_socket_t *by_port;  // 65536 entries: a port's first socket, CURL_SOCKET_BAD for none
    tb_kept_socket *others;  // the sockets of ports that have one already (to other addresses)
    size_t other_count;
    size_t other_capacity;
} tb_kept_sockets;
int tb_kept_init(tb_kept_sockets *kept); // 0 when memory ran out
void tb_kept_free(tb_kept_sockets *kept);
void tb_kept_note(tb_kept_sockets *kept, long local_port, curl_socket_t socket);
// The socket of the kept connection from `local_port` to `remote` (an address as text) at
// `remote_port`; CURL_SOCKET_BAD when none was noted.
curl_socket_t tb_kept_find(const tb_kept_sockets *kept, long local_port, const char *remote, int remote_port);
void tb_kept_forget(tb_kept_sockets *kept, curl_socket_t socket);
// A socket's local port; -1 when it cannot be read.
long tb_local_port(curl_socket_t socket);
// The loop's kept sockets.
tb_kept_sockets *tb_loop_kept(tb_proxy_loop *loop);

// A copy of `request` to run on `loop` later, with its deadline from now; NULL when memory ran
// out.
tb_transfer *tb_transfer_copy(const tb_proxy_request *request, tb_proxy_loop *loop, uint64_t tag);
// Sets the transfer's options on `easy` (fresh or reset); 0 when libcurl refused one.
int tb_transfer_prepare(tb_transfer *transfer, CURL *easy);
// Whether a transfer libcurl ended with `code` gave up a stale kept connection and is to run again
// on a new one (once).
int tb_transfer_retries_fresh(tb_transfer *transfer, CURLcode code);
// The outcome of a transfer libcurl ended with `code` (or that the loop ended: its own outcome
// and error text, `code` then unused), handed to on_done; then the transfer is freed.
void tb_transfer_end(tb_transfer *transfer, CURLcode code);
void tb_transfer_end_as(tb_transfer *transfer, int outcome, const char *error);

#endif
