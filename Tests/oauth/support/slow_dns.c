// An LD_PRELOAD interposer for the API proxy's tests: getaddrinfo() for a name under
// slow-dns.test takes SLOW_DNS_SECONDS (default 4) and then fails, as a resolver whose DNS server
// does not answer would; every other name is resolved as usual.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **result) {
    static const char suffix[] = "slow-dns.test";
    size_t length = node ? strlen(node) : 0;
    if (length >= sizeof suffix - 1 && strcmp(node + length - (sizeof suffix - 1), suffix) == 0) {
        const char *seconds = getenv("SLOW_DNS_SECONDS");
        sleep(seconds ? (unsigned)atoi(seconds) : 4);
        return EAI_AGAIN;
    }
    int (*real)(const char *, const char *, const struct addrinfo *, struct addrinfo **) = dlsym(RTLD_NEXT, "getaddrinfo");
    return real(node, service, hints, result);
}
