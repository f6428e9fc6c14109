// The API proxy's HTTP client: libcurl's easy interface, one exchange per call on the calling
// thread, handles kept in a small pool so that their connections are reused.

#include "curl_shim.h"

#include <curl/curl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

enum { POOL_SIZE = 64 };

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static CURL *pool[POOL_SIZE];
static int pool_count;

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
    int refused;
    int too_large;
    int head_done;
    size_t streamed_bytes;
} exchange;

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
        return x->request->on_body(x->request->context, (const uint8_t *)data, bytes) ? bytes : 0;
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

static CURL *take_handle(void) {
    CURL *handle = NULL;
    pthread_mutex_lock(&pool_lock);
    if (pool_count > 0) handle = pool[--pool_count];
    pthread_mutex_unlock(&pool_lock);
    if (handle) {
        curl_easy_reset(handle); // options only: its connections stay for reuse
        return handle;
    }
    return curl_easy_init();
}

static void give_back(CURL *handle) {
    pthread_mutex_lock(&pool_lock);
    if (pool_count < POOL_SIZE) {
        pool[pool_count++] = handle;
        handle = NULL;
    }
    pthread_mutex_unlock(&pool_lock);
    if (handle) curl_easy_cleanup(handle);
}

void tb_proxy_perform(const tb_proxy_request *request, tb_proxy_response *response) {
    memset(response, 0, sizeof *response);
    tb_proxy_global_init();
    CURL *handle = take_handle();
    if (!handle) {
        response->outcome = TB_PROXY_FAILED;
        strcpy(response->error, "no libcurl handle");
        return;
    }
    exchange x = {.request = request, .response = response, .handle = handle};
    struct curl_slist *headers = NULL;
    for (size_t i = 0; i < request->header_count; i++) {
        struct curl_slist *next = curl_slist_append(headers, request->headers[i]);
        if (!next) break;
        headers = next;
    }
    curl_easy_setopt(handle, CURLOPT_URL, request->url);
    curl_easy_setopt(handle, CURLOPT_PROTOCOLS_STR, request->allow_http ? "http,https" : "https");
    curl_easy_setopt(handle, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(handle, CURLOPT_PROXY, ""); // never a proxy from the environment
    curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, request->timeout_ms);
    curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS, request->connect_timeout_ms);
    curl_easy_setopt(handle, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)request->max_response_bytes);
    curl_easy_setopt(handle, CURLOPT_USERAGENT, "token-broker");
    curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
    curl_easy_setopt(handle, CURLOPT_OPENSOCKETDATA, &x);
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(handle, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(handle, CURLOPT_HEADERDATA, &x);
    if (strcmp(request->method, "HEAD") == 0) {
        curl_easy_setopt(handle, CURLOPT_NOBODY, 1L);
    } else if (strcmp(request->method, "GET") != 0 || request->has_body) {
        curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, request->method);
    }
    if (request->has_body) {
        curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)request->body_length);
        curl_easy_setopt(handle, CURLOPT_POSTFIELDS, request->body_length ? (const char *)request->body : "");
    }

    CURLcode code = curl_easy_perform(handle);
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &response->status);
    if (code == CURLE_OK) {
        response->outcome = TB_PROXY_OK;
    } else if (x.too_large || code == CURLE_FILESIZE_EXCEEDED) {
        response->outcome = TB_PROXY_TOO_LARGE;
    } else if (x.refused && (code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_HOST)) {
        response->outcome = TB_PROXY_ADDRESS_REFUSED;
    } else if (code == CURLE_OPERATION_TIMEDOUT) {
        response->outcome = TB_PROXY_TIMEOUT;
    } else if (code == CURLE_COULDNT_RESOLVE_HOST || code == CURLE_COULDNT_CONNECT || code == CURLE_SSL_CONNECT_ERROR ||
               code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SEND_ERROR || code == CURLE_RECV_ERROR ||
               code == CURLE_GOT_NOTHING) {
        response->outcome = TB_PROXY_UNREACHABLE;
    } else {
        response->outcome = TB_PROXY_FAILED;
    }
    if (code != CURLE_OK) {
        // libcurl's fixed text for the code only: its detailed message can quote the URL, whose
        // query may hold a secret the app put there.
        snprintf(response->error, sizeof response->error, "%s", curl_easy_strerror(code));
    }
    curl_easy_setopt(handle, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(headers);
    give_back(handle);
}

void tb_proxy_response_free(tb_proxy_response *response) {
    free(response->headers);
    free(response->body);
    response->headers = NULL;
    response->body = NULL;
}
