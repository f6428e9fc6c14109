// The API proxy's address policy: which addresses a transfer never connects to (loopback,
// private, link-local, cloud metadata, multicast and reserved ranges, and IPv4 inside IPv6), checked
// for every address a host resolves to, just before connect() (transfer.c's open-socket callback).

#include "curl_internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

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

int tb_refused_sockaddr(const struct sockaddr *address) {
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

