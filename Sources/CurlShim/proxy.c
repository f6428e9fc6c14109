// The API proxy's HTTP client: libcurl's easy interface, one exchange per call on the calling
// thread, handles kept in a small pool so that their connections are reused by the same caller.

#include "curl_shim.h"

#include <curl/curl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

enum { POOL_SIZE = 64, POOL_KEY_SIZE = 96 };

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    CURL *handle;
    char key[POOL_KEY_SIZE];
} pool[POOL_SIZE];
static int pool_count; // pool[0] the least recently used

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

void tb_proxy_global_init(void) { pthread_once(&init_once, init); }

// MARK: the address policy

static int refused_v4(const uint8_t *b) {
    if (b[0] == 0 || b[0] == 10 || b[0] == 127) return 1;               // this network, private, loopback
    if (b[0] == 100 && (b[1] & 0xc0) == 64) return 1;                    // 100.64.0.0/10 shared (CGNAT)
    if (b[0] == 169 && b[1] == 254) return 1;                            // link-local, cloud metadata
    if (b[0] == 172 && (b[1] & 0xf0) == 16) return 1;                    // 172.16.0.0/12
    if (b[0] == 192 && b[1] == 168) return 1;                            // 192.168.0.0/16
    if (b[0] == 192 && b[1] == 0 && b[2] == 0) return 1;                 // 192.0.0.0/24 protocol assignments
    if (b[0] == 198 && (b[1] & 0xfe) == 18) return 1;                    // 198.18.0.0/15 benchmarking
    if (b[0] == 192 && b[1] == 0 && b[2] == 2) return 1;                 // 192.0.2.0/24 TEST-NET-1
    if (b[0] == 198 && b[1] == 51 && b[2] == 100) return 1;              // 198.51.100.0/24 TEST-NET-2
    if (b[0] == 203 && b[1] == 0 && b[2] == 113) return 1;               // 203.0.113.0/24 TEST-NET-3
    if (b[0] >= 224) return 1;                                           // multicast, reserved, broadcast
    return 0;
}

static int refused_v6(const uint8_t *b) {
    static const uint8_t zero[16] = {0};
    if (memcmp(b, zero, 15) == 0 && (b[15] == 0 || b[15] == 1)) return 1;    // :: and ::1
    if ((b[0] & 0xfe) == 0xfc) return 1;                                       // fc00::/7 unique local (AWS fd00:ec2::254)
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return 1;                       // fe80::/10 link-local
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return 1;                       // fec0::/10 site-local (deprecated, still routed inside)
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) return 1; // 2001:db8::/32 documentation
    if (b[0] == 0 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0 && b[5] == 1) return 1; // 64:ff9b:1::/48 local-use NAT64
    if (b[0] == 0xff) return 1;                                                // multicast
    // IPv4 inside IPv6: mapped (::ffff:0:0/96), translated (SIIT, ::ffff:0:0:0/96), compatible (::/96),
    // NAT64 (64:ff9b::/96), 6to4 (2002::/16).
    if (memcmp(b, zero, 10) == 0 && b[10] == 0xff && b[11] == 0xff) return refused_v4(b + 12);
    if (memcmp(b, zero, 8) == 0 && b[8] == 0xff && b[9] == 0xff && b[10] == 0 && b[11] == 0) return refused_v4(b + 12);
    if (memcmp(b, zero, 12) == 0) return refused_v4(b + 12);
    if (b[0] == 0 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && memcmp(b + 4, zero, 8) == 0) return refused_v4(b + 12);
    if (b[0] == 0x20 && b[1] == 0x02) return refused_v4(b + 2);
    return 0;
}

static int refused_sockaddr(const struct sockaddr *address) {
    if (address->sa_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)address;
        return refused_v4((const uint8_t *)&v4->sin_addr.s_addr);
    }
    if (address->sa_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)address;
        return refused_v6(v6->sin6_addr.s6_addr);
    }
    return 1;
}

int tb_proxy_address_refused(const char *address) {
    uint8_t bytes[16];
    if (inet_pton(AF_INET, address, bytes) == 1) return refused_v4(bytes);
    if (inet_pton(AF_INET6, address, bytes) == 1) return refused_v6(bytes);
    return -1;
}

// MARK: one exchange

typedef struct {
    const tb_proxy_request *request;
    tb_proxy_response *response;
    CURL *handle;
    size_t headers_capacity;
    size_t body_capacity;
    long long deadline_ms; // on the monotonic clock
    int refused;
    int too_large;
    int timed_out;
    int switched;  // a 101: the connection would speak something else
    int interim;   // a 1xx came before the final answer
    int head_done;
    size_t streamed_bytes;
} exchange;

static long long now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

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
    exchange *x = context;
    size_t bytes = size * count;
    if (x->response->streamed) {
        if (x->streamed_bytes + bytes > x->request->max_response_bytes) {
            x->too_large = 1;
            return 0;
        }
        x->streamed_bytes += bytes;
        // libcurl's own timeout cannot act while this waits for a slow client: the wait ends at
        // the transfer's deadline, and so does the transfer.
        long long left = x->deadline_ms - now_ms();
        if (left <= 0 || !x->request->on_body(x->request->context, (const uint8_t *)data, bytes, (long)left)) {
            x->timed_out = now_ms() >= x->deadline_ms;
            return 0;
        }
        return bytes;
    }
    if (x->response->body_length + bytes > x->request->max_response_bytes) {
        x->too_large = 1;
        return 0; // aborts the transfer: never a truncated answer
    }
    if (!append((char **)&x->response->body, &x->response->body_length, &x->body_capacity, data, bytes)) return 0;
    return bytes;
}

static size_t on_header(char *data, size_t size, size_t count, void *context) {
    exchange *x = context;
    size_t bytes = size * count;
    if (bytes >= 5 && memcmp(data, "HTTP/", 5) == 0) {
        // A new answer begins (after a 100 Continue): keep only the last one's headers.
        x->response->headers_length = 0;
        return bytes;
    }
    if (bytes <= 2) { // the blank line that ends a head
        long status = 0;
        curl_easy_getinfo(x->handle, CURLINFO_RESPONSE_CODE, &status);
        if (status == 101) {
            // libcurl would read whatever follows as a body until the connection closed.
            x->switched = 1;
            return 0;
        }
        if (status < 200) x->interim = 1;
        if (status >= 200 && !x->head_done && x->request->on_head != NULL) {
            x->head_done = 1;
            curl_off_t length = -1;
            curl_easy_getinfo(x->handle, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
            const char *headers = x->response->headers ? x->response->headers : "";
            x->response->streamed = x->request->on_head(x->request->context, status, headers,
                                                        x->response->headers_length, (long long)length);
        }
        return bytes;
    }
    if (!append(&x->response->headers, &x->response->headers_length, &x->headers_capacity, data, bytes)) return 0;
    return bytes;
}

static curl_socket_t on_open_socket(void *context, curlsocktype purpose, struct curl_sockaddr *address) {
    exchange *x = context;
    (void)purpose;
    if (!x->request->allow_private_addresses && refused_sockaddr(&address->addr)) {
        x->refused = 1;
        return CURL_SOCKET_BAD;
    }
    return socket(address->family, address->socktype, address->protocol);
}

// MARK: the pool

// A handle keeps the connections it opened. It goes back only to requests with the same key
// (the caller's, and the address policy and schemes it was opened under), so that bytes an API
// sent after one session's answer are never read as another session's, and a connection opened
// where private addresses were allowed never serves a call where they are not.
static CURL *take_handle(const char *key) {
    CURL *handle = NULL;
    pthread_mutex_lock(&pool_lock);
    for (int i = pool_count - 1; i >= 0; i--) {
        if (strcmp(pool[i].key, key) != 0) continue;
        handle = pool[i].handle;
        memmove(&pool[i], &pool[i + 1], (size_t)(pool_count - i - 1) * sizeof pool[0]);
        pool_count -= 1;
        break;
    }
    pthread_mutex_unlock(&pool_lock);
    if (handle) {
        curl_easy_reset(handle); // options only: its connections stay for reuse
        return handle;
    }
    return curl_easy_init();
}

static void give_back(CURL *handle, const char *key) {
    CURL *evicted = NULL;
    pthread_mutex_lock(&pool_lock);
    if (pool_count == POOL_SIZE) {
        evicted = pool[0].handle; // the least recently used
        memmove(&pool[0], &pool[1], (size_t)(POOL_SIZE - 1) * sizeof pool[0]);
        pool_count -= 1;
    }
    pool[pool_count].handle = handle;
    snprintf(pool[pool_count].key, sizeof pool[0].key, "%s", key);
    pool_count += 1;
    pthread_mutex_unlock(&pool_lock);
    if (evicted) curl_easy_cleanup(evicted);
}

// Whether the connection may serve another request: only after an answer libcurl framed
// exactly. After a HEAD, a 1xx, a 204 or a 304 an API may still send a body libcurl does not
// expect, which the next request on the connection would read as its answer; after a failure
// the connection's state is unknown.
static int reusable(CURLcode code, const exchange *x) {
    if (code != CURLE_OK || x->interim) return 0;
    if (strcmp(x->request->method, "HEAD") == 0) return 0;
    long status = x->response->status;
    return status >= 200 && status != 204 && status != 304;
}

// Sets the exchange's options; 0 when libcurl refused one (an option it does not know would
// otherwise drop a rule silently, such as the https-only CURLOPT_PROTOCOLS_STR).
static int set_options(CURL *handle, const tb_proxy_request *request, exchange *x, struct curl_slist *headers) {
#define SET(option, value) \
    if (curl_easy_setopt(handle, option, value) != CURLE_OK) return 0
    SET(CURLOPT_URL, request->url);
    SET(CURLOPT_PROTOCOLS_STR, request->allow_http ? "http,https" : "https");
    SET(CURLOPT_FOLLOWLOCATION, 0L);
    SET(CURLOPT_PROXY, ""); // never a proxy from the environment
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_TIMEOUT_MS, request->timeout_ms);
    SET(CURLOPT_CONNECTTIMEOUT_MS, request->connect_timeout_ms);
    SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)request->max_response_bytes);
    SET(CURLOPT_USERAGENT, "token-broker");
    SET(CURLOPT_HTTPHEADER, headers);
    SET(CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
    SET(CURLOPT_OPENSOCKETDATA, x);
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, x);
    SET(CURLOPT_HEADERFUNCTION, on_header);
    SET(CURLOPT_HEADERDATA, x);
    if (strcmp(request->method, "HEAD") == 0) {
        SET(CURLOPT_NOBODY, 1L);
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

void tb_proxy_perform(const tb_proxy_request *request, tb_proxy_response *response) {
    memset(response, 0, sizeof *response);
    tb_proxy_global_init();
    char key[POOL_KEY_SIZE];
    snprintf(key, sizeof key, "%d%d %s", request->allow_private_addresses, request->allow_http,
             request->connection_key ? request->connection_key : "");
    CURL *handle = take_handle(key);
    if (!handle) {
        response->outcome = TB_PROXY_FAILED;
        strcpy(response->error, "no libcurl handle");
        return;
    }
    exchange x = {.request = request, .response = response, .handle = handle, .deadline_ms = now_ms() + request->timeout_ms};
    struct curl_slist *headers = NULL;
    for (size_t i = 0; i < request->header_count; i++) {
        struct curl_slist *next = curl_slist_append(headers, request->headers[i]);
        if (!next) break;
        headers = next;
    }
    if (!set_options(handle, request, &x, headers)) {
        response->outcome = TB_PROXY_FAILED;
        strcpy(response->error, "libcurl refused an option of the call");
        curl_slist_free_all(headers);
        curl_easy_cleanup(handle);
        return;
    }

    CURLcode code = curl_easy_perform(handle);
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &response->status);
    if (code == CURLE_OK) {
        response->outcome = TB_PROXY_OK;
    } else if (x.too_large || code == CURLE_FILESIZE_EXCEEDED) {
        response->outcome = TB_PROXY_TOO_LARGE;
    } else if (x.refused && (code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_HOST)) {
        response->outcome = TB_PROXY_ADDRESS_REFUSED;
    } else if (x.switched) {
        response->outcome = TB_PROXY_FAILED;
        strcpy(response->error, "the API switched protocols");
    } else if (code == CURLE_OPERATION_TIMEDOUT || x.timed_out) {
        response->outcome = TB_PROXY_TIMEOUT;
    } else if (code == CURLE_COULDNT_RESOLVE_HOST || code == CURLE_COULDNT_CONNECT || code == CURLE_SSL_CONNECT_ERROR ||
               code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SEND_ERROR || code == CURLE_RECV_ERROR ||
               code == CURLE_GOT_NOTHING) {
        response->outcome = TB_PROXY_UNREACHABLE;
    } else {
        response->outcome = TB_PROXY_FAILED;
    }
    if (code != CURLE_OK && response->error[0] == 0) {
        // libcurl's fixed text for the code only: its detailed message can quote the URL, whose
        // query may hold a secret the app put there.
        snprintf(response->error, sizeof response->error, "%s", curl_easy_strerror(code));
    }
    curl_slist_free_all(headers);
    if (reusable(code, &x)) { // its options, the freed header list among them, are reset before its next use
        give_back(handle, key);
    } else {
        curl_easy_cleanup(handle); // and with it the connection
    }
}

void tb_proxy_response_free(tb_proxy_response *response) {
    free(response->headers);
    free(response->body);
    response->headers = NULL;
    response->body = NULL;
}
