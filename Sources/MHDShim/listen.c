// The listening socket the daemon is given (include/mhd_shim.h): made here, so that the broker
// knows the port it got (port 0) before the daemon starts.
#include "shim_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int tb_fill_address(const char *host, uint16_t port, struct sockaddr_storage *storage,
                           socklen_t *length) {
    memset(storage, 0, sizeof *storage);
    struct sockaddr_in *v4 = (struct sockaddr_in *)storage;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)storage;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        *length = sizeof *v4;
        return 1;
    }
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        *length = sizeof *v6;
        return 1;
    }
    return 0;
}

int tb_listen(const char *host, uint16_t port, uint16_t *bound_port, char *error,
              size_t error_size) {
    struct sockaddr_storage address;
    socklen_t length = 0;
    if (!tb_fill_address(host, port, &address, &length)) {
        snprintf(error, error_size, "%s is not an IP address", host);
        return -1;
    }
    int fd = socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(error, error_size, "cannot create a socket: %s", strerror(errno));
        return -1;
    }
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (address.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &yes, sizeof yes);
    if (bind(fd, (struct sockaddr *)&address, length) != 0 || listen(fd, SOMAXCONN) != 0) {
        snprintf(error, error_size, "cannot listen on %s port %u: %s", host, (unsigned)port,
                 strerror(errno));
        close(fd);
        return -1;
    }
    length = sizeof address;
    getsockname(fd, (struct sockaddr *)&address, &length);
    *bound_port = ntohs(address.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&address)->sin6_port
                                                      : ((struct sockaddr_in *)&address)->sin_port);
    return fd;
}

void tb_close_socket(int socket) { close(socket); }
