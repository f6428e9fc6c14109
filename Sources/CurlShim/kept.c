// The sockets of connections kept for reuse, by local port. libcurl tells a transfer which
// connection it is given by its local port only; the socket is what a check for stale bytes
// reads (transfer.c, on_prerequest). Noted when the connection is made, forgotten when its
// socket closes. The loop's thread only.

#include "curl_internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>

int tb_kept_init(tb_kept_sockets *kept) {
    kept->by_port = malloc(65536 * sizeof *kept->by_port);
    if (kept->by_port == NULL) return 0;
    for (int port = 0; port < 65536; port++) kept->by_port[port] = CURL_SOCKET_BAD;
    return 1;
}

void tb_kept_free(tb_kept_sockets *kept) { free(kept->by_port); }

long tb_local_port(curl_socket_t socket) {
    struct sockaddr_storage address;
    socklen_t length = sizeof address;
    if (getsockname(socket, (struct sockaddr *)&address, &length) != 0) return -1;
    return address.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&address)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)&address)->sin_port);
}

void tb_kept_note(tb_kept_sockets *kept, long local_port, curl_socket_t socket) {
    if (local_port > 0 && local_port < 65536) kept->by_port[local_port] = socket;
}

curl_socket_t tb_kept_find(const tb_kept_sockets *kept, long local_port) {
    return local_port > 0 && local_port < 65536 ? kept->by_port[local_port] : CURL_SOCKET_BAD;
}

void tb_kept_forget(tb_kept_sockets *kept, curl_socket_t socket) {
    long port = tb_local_port(socket);
    if (port > 0 && kept->by_port[port] == socket) kept->by_port[port] = CURL_SOCKET_BAD;
}
