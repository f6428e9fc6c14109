// The sockets of connections kept for reuse, by local port. libcurl tells a transfer which
// connection it is given by its addresses only (its local port; the remote address and port);
// the socket is what a check for stale bytes reads (transfer.c, on_prerequest). Noted when the
// connection is made, forgotten when its socket closes. The loop's thread only.
//
// A local port is not one connection's: Linux gives the same ephemeral port to connections to
// different remote addresses (only the four together are unique), which happens once a loop holds
// a few thousand. The first socket of a port is in `by_port`; others of the same port, rare, in
// `others`, and the remote address tells them apart.

#include "curl_internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int tb_kept_init(tb_kept_sockets *kept) {
    kept->by_port = malloc(65536 * sizeof *kept->by_port);
    if (kept->by_port == NULL) return 0;
    for (int port = 0; port < 65536; port++) kept->by_port[port] = CURL_SOCKET_BAD;
    kept->others = NULL;
    kept->other_count = 0;
    kept->other_capacity = 0;
    return 1;
}

void tb_kept_free(tb_kept_sockets *kept) {
    free(kept->by_port);
    free(kept->others);
}

long tb_local_port(curl_socket_t socket) {
    struct sockaddr_storage address;
    socklen_t length = sizeof address;
    if (getsockname(socket, (struct sockaddr *)&address, &length) != 0) return -1;
    return address.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&address)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)&address)->sin_port);
}

void tb_kept_note(tb_kept_sockets *kept, long local_port, curl_socket_t socket) {
    if (local_port <= 0 || local_port >= 65536 || kept->by_port[local_port] == socket) return;
    if (kept->by_port[local_port] == CURL_SOCKET_BAD) {
        kept->by_port[local_port] = socket;
        return;
    }
    if (kept->other_count == kept->other_capacity) {
        size_t capacity = kept->other_capacity ? kept->other_capacity * 2 : 8;
        tb_kept_socket *grown = realloc(kept->others, capacity * sizeof *grown);
        // Not noted, it is not found (its remote address tells it from the port's first): a
        // transfer given its connection takes a new one instead.
        if (grown == NULL) return;
        kept->others = grown;
        kept->other_capacity = capacity;
    }
    kept->others[kept->other_count++] = (tb_kept_socket){ .port = local_port, .socket = socket };
}

// Whether `socket` is connected to `remote` (an address as text, as libcurl writes it) at
// `remote_port`.
static int connected_to(curl_socket_t socket, const char *remote, int remote_port) {
    struct sockaddr_storage address;
    socklen_t length = sizeof address;
    if (getpeername(socket, (struct sockaddr *)&address, &length) != 0) return 0;
    char text[INET6_ADDRSTRLEN];
    const void *raw = address.ss_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)&address)->sin6_addr
                                                    : (const void *)&((struct sockaddr_in *)&address)->sin_addr;
    int port = address.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&address)->sin6_port)
                                             : ntohs(((struct sockaddr_in *)&address)->sin_port);
    return inet_ntop(address.ss_family, raw, text, sizeof text) != NULL && port == remote_port && strcmp(text, remote) == 0;
}

curl_socket_t tb_kept_find(const tb_kept_sockets *kept, long local_port, const char *remote, int remote_port) {
    if (local_port <= 0 || local_port >= 65536) return CURL_SOCKET_BAD;
    curl_socket_t first = kept->by_port[local_port];
    // Its remote address checked even when it is the port's only socket: a connection whose
    // note failed may share the port with it.
    if (first != CURL_SOCKET_BAD && connected_to(first, remote, remote_port)) return first;
    for (size_t i = 0; i < kept->other_count; i++) {
        if (kept->others[i].port == local_port && connected_to(kept->others[i].socket, remote, remote_port)) return kept->others[i].socket;
    }
    return CURL_SOCKET_BAD;
}

void tb_kept_forget(tb_kept_sockets *kept, curl_socket_t socket) {
    long port = tb_local_port(socket);
    if (port <= 0 || port >= 65536) return;
    for (size_t i = 0; i < kept->other_count; i++) {
        if (kept->others[i].port != port) continue;
        if (kept->others[i].socket == socket || kept->by_port[port] == socket) {
            // The first of the port gone, another of it takes its place.
            if (kept->others[i].socket != socket) kept->by_port[port] = kept->others[i].socket;
            kept->others[i] = kept->others[--kept->other_count];
            return;
        }
    }
    if (kept->by_port[port] == socket) kept->by_port[port] = CURL_SOCKET_BAD;
}
