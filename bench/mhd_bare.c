/* A bare libmicrohttpd responder for the benchmark (bench/run.py): the machine's floor for an
 * HTTP answer from libmicrohttpd, configured as the broker's server is (internal polling thread
 * pool with epoll, the same pool size, bound to 127.0.0.1), answering every request with the same
 * bytes: the status, headers and body given in a file.
 *
 *   mhd_bare PORT THREADS RESPONSE_FILE [fresh]
 *
 * By default one response, made at the start, answers every request. With `fresh`, each request
 * gets a response made for it (its body copied, its headers added, as a server whose answers
 * differ from one request to the next must make them), destroyed once queued.
 *
 * RESPONSE_FILE: header lines "Name: value", an empty line, then the body (sent as is).
 * Runs until SIGTERM or SIGINT. Prints "listening PORT" once it accepts connections.
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_HEADERS = 32 };

static struct MHD_Response *response; /* without `fresh` */
static const char *body;
static size_t body_size;
static const char *header_names[MAX_HEADERS], *header_values[MAX_HEADERS];
static int header_count;

/* A response with the file's body and headers; NULL when libmicrohttpd refuses one. */
static struct MHD_Response *make_response(enum MHD_ResponseMemoryMode mode) {
    struct MHD_Response *made = MHD_create_response_from_buffer(body_size, (void *)body, mode);
    for (int i = 0; made && i < header_count; i++) {
        if (MHD_add_response_header(made, header_names[i], header_values[i]) != MHD_YES) {
            MHD_destroy_response(made);
            made = NULL;
        }
    }
    return made;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *connection, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls) {
    (void)cls; (void)url; (void)method; (void)version; (void)upload_data;
    if (*con_cls == NULL) { /* first call: headers only */
        *con_cls = (void *)1;
        return MHD_YES;
    }
    if (*upload_data_size != 0) { /* discard a body */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (response) return MHD_queue_response(connection, MHD_HTTP_OK, response);
    struct MHD_Response *fresh = make_response(MHD_RESPMEM_MUST_COPY);
    if (!fresh) return MHD_NO;
    enum MHD_Result queued = MHD_queue_response(connection, MHD_HTTP_OK, fresh);
    MHD_destroy_response(fresh); /* freed once sent */
    return queued;
}

static char *read_file(const char *path, size_t *size) {
    FILE *file = fopen(path, "rb");
    if (!file) return NULL;
    fseek(file, 0, SEEK_END);
    long length = ftell(file);
    fseek(file, 0, SEEK_SET);
    char *bytes = malloc((size_t)length + 1);
    if (!bytes || fread(bytes, 1, (size_t)length, file) != (size_t)length) { fclose(file); return NULL; }
    fclose(file);
    bytes[length] = 0;
    *size = (size_t)length;
    return bytes;
}

int main(int argc, char **argv) {
    if ((argc != 4 && argc != 5) || (argc == 5 && strcmp(argv[4], "fresh") != 0)) {
        fprintf(stderr, "usage: mhd_bare PORT THREADS RESPONSE_FILE [fresh]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    unsigned int threads = (unsigned int)atoi(argv[2]);
    size_t size;
    char *text = read_file(argv[3], &size);
    if (!text) { perror(argv[3]); return 2; }
    char *separator = strstr(text, "\n\n");
    if (!separator) { fprintf(stderr, "%s: no empty line between headers and body\n", argv[3]); return 2; }
    *separator = 0;
    body = separator + 2;
    body_size = size - (size_t)(body - text);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *colon = strchr(line, ':');
        if (!colon) continue;
        if (header_count == MAX_HEADERS) { fprintf(stderr, "%s: more than %d headers\n", argv[3], MAX_HEADERS); return 2; }
        *colon = 0;
        char *value = colon + 1;
        while (*value == ' ') value++;
        header_names[header_count] = line;
        header_values[header_count++] = value;
    }
    if (argc == 4 && !(response = make_response(MHD_RESPMEM_PERSISTENT))) {
        fprintf(stderr, "mhd_bare: libmicrohttpd refused the response\n");
        return 1;
    }

    /* Blocked before the pool starts, so that every thread inherits the mask and sigwait gets them. */
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals, NULL);

    struct sockaddr_in address;
    memset(&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_port = htons((uint16_t)port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct MHD_OptionItem items[] = {
        {MHD_OPTION_SOCK_ADDR, 0, &address},
        {MHD_OPTION_CONNECTION_TIMEOUT, 30, NULL},
        {threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, (intptr_t)threads, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    struct MHD_Daemon *daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG, (uint16_t)port, NULL, NULL,
        on_access, NULL, MHD_OPTION_ARRAY, items, MHD_OPTION_END);
    if (!daemon) { fprintf(stderr, "mhd_bare: cannot start on 127.0.0.1:%d\n", port); return 1; }

    printf("listening %d\n", port);
    fflush(stdout);
    int received;
    sigwait(&signals, &received);
    MHD_stop_daemon(daemon);
    if (response) MHD_destroy_response(response);
    free(text);
    return 0;
}
