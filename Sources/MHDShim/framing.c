// What libmicrohttpd 0.9.75 lets through in a request head, checked when the head is complete
// (RFC 9112): the building blocks of request smuggling behind a lenient proxy.
//
// libmicrohttpd uses the first of several Content-Length values, takes Transfer-Encoding over
// Content-Length without closing afterwards, reads a body of an unknown transfer coding until the
// client closes, keeps whitespace before a colon in the header's name, needs no Host, and ends a
// target or a header value at a NUL byte without a word, and passes a singleton header given twice
// (Host, Authorization) on to the handler. It answers some malformed heads itself
// (a Content-Length that is not a number, a line without a colon, a NUL in a header's name, an
// unknown HTTP version); the checks here cover what reaches the shim.
//
// NUL bytes are found from where libmicrohttpd keeps the head: one piece of its connection
// memory, each line ending overwritten with NULs (one per byte: CRLF or a bare LF). A target or
// a value that ends early, before its line's end, contained a NUL. A folded header line (obs-fold)
// breaks the same chain; RFC 9112 §5.2 allows refusing it.
#include "shim_internal.h"

#include <string.h>
#include <strings.h>

typedef struct {
    size_t bytes;           // names and values, for request->header_bytes
    const char *line_start; // where the next header line must start, give or take its line end
    int broken;             // a gap: a NUL in a value, or a folded line
    int space_in_name;
    int name_not_token;     // a byte other than a token's in a name (RFC 9110 5.1)
    int cr_in_value;        // a bare CR in a value (RFC 9110 5.5: reject it)
    int hosts;
    const char *host;
    int authorizations;
    int content_lengths;
    int transfer_encodings;
    const char *transfer_encoding;
} tb_head_scan;

// Whether `name` is a token (RFC 9110 5.6.2): letters, digits and !#$%&'*+-.^_`|~. Whitespace is
// checked apart, with its own words.
static int tb_is_token_byte(unsigned char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return 1;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int tb_is_token(const char *name) {
    for (const unsigned char *c = (const unsigned char *)name; *c != '\0'; c++) {
        if (*c != ' ' && *c != '\t' && !tb_is_token_byte(*c)) return 0;
    }
    return 1;
}

// Whether `start` follows `end` (the end of the previous line's text) across one line ending:
// one or two NULs (CRLF or bare LF), nothing else.
static int tb_follows(const char *end, const char *start) {
    return start == end + 1 || start == end + 2;
}

static enum MHD_Result tb_scan_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value) {
    (void)kind;
    tb_head_scan *scan = cls;
    size_t key_length = strlen(key);
    // Names and values both count: tb_request_header_joined's callers rely on a header's values,
    // joined by two-byte separators, fitting in this total. So the walk goes on when broken.
    scan->bytes += key_length + (value != NULL ? strlen(value) : 0);
    if (scan->broken) return MHD_YES;
    if (!tb_follows(scan->line_start, key) || value == NULL) {
        scan->broken = 1;
        return MHD_YES;
    }
    // The value starts after the colon (overwritten with a NUL) and optional whitespace.
    if (value < key + key_length + 1) {
        scan->broken = 1;
        return MHD_YES;
    }
    for (const char *between = key + key_length + 1; between < value; between++) {
        if (*between != ' ' && *between != '\t') {
            scan->broken = 1;
            return MHD_YES;
        }
    }
    scan->line_start = value + strlen(value);
    if (strpbrk(key, " \t") != NULL) scan->space_in_name = 1;
    if (!tb_is_token(key)) scan->name_not_token = 1;
    // A bare CR, which a proxy in front may take for a line's end (a line of its own there).
    if (strchr(value, '\r') != NULL) scan->cr_in_value = 1;
    if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) {
        scan->hosts += 1;
        scan->host = value;
    }
    if (strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0) scan->authorizations += 1;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) scan->content_lengths += 1;
    if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        scan->transfer_encodings += 1;
        scan->transfer_encoding = value;
    }
    return MHD_YES;
}

// Whether the last coding of a Transfer-Encoding list is chunked.
static int tb_ends_chunked(const char *codings) {
    const char *last = strrchr(codings, ',');
    last = last != NULL ? last + 1 : codings;
    while (*last == ' ' || *last == '\t') last++;
    size_t length = strlen(last);
    while (length > 0 && (last[length - 1] == ' ' || last[length - 1] == '\t')) length--;
    return length == 7 && strncasecmp(last, "chunked", 7) == 0;
}

// Whether the method is a token that ends where the request line's space was: libmicrohttpd
// cuts the method at the first space, so a NUL before it ends the text early.
static int tb_method_is_token(const char *method, const char *raw_target) {
    size_t length = strlen(method);
    if (length == 0) return 0;
    for (const unsigned char *c = (const unsigned char *)method; *c != '\0'; c++) {
        if (!tb_is_token_byte(*c)) return 0;
    }
    if (raw_target == NULL) return 1;
    for (const char *c = method + length; c < raw_target; c++) {
        if (*c != '\0' && *c != ' ') return 0;
    }
    return 1;
}

// A request target in absolute form (RFC 9112 3.2.2: "http://host/path?query"), which a server
// must accept, becomes its origin form ("/path?query") in place. Its authority stands for Host
// (RFC 9112 3.2.2), so it must be the Host a client also sent (and an HTTP/1.0 request without
// Host may give it alone): a request naming two hosts would reach this server as one and be
// checked (the admin listener's Host check) as the other. Returns 0 when that does not hold.
static int tb_take_absolute_form(tb_request *request, const char *host) {
    char *target = request->target;
    size_t scheme = strncasecmp(target, "http://", 7) == 0 ? 7 : strncasecmp(target, "https://", 8) == 0 ? 8 : 0;
    if (scheme == 0) return 1; // origin form, or a form no route takes (404)
    char *authority = target + scheme;
    size_t authority_length = strcspn(authority, "/?#");
    const char *at = NULL; // the last '@' of the authority ends its user information
    for (const char *c = authority; c < authority + authority_length; c++) {
        if (*c == '@') at = c;
    }
    if (at != NULL) {
        // Refused; the user information (a password, maybe) is cut from the target first: the
        // access log writes the target's path.
        size_t cut = (size_t)(at + 1 - authority);
        memmove(authority, at + 1, request->target_length - (size_t)(at + 1 - target) + 1);
        request->target_length -= cut;
        return 0;
    }
    if (authority_length == 0) return 0;
    if (host != NULL && (strlen(host) != authority_length || strncasecmp(host, authority, authority_length) != 0)) return 0;
    const char *rest = authority + authority_length;
    size_t rest_length = request->target_length - (size_t)(rest - target);
    size_t offset = rest[0] == '/' ? 0 : 1;
    memmove(target + offset, rest, rest_length + 1);
    if (offset == 1) target[0] = '/';
    request->target_length = rest_length + offset;
    return 1;
}

static tb_limit tb_refuse(tb_request *request, tb_limit limit, const char *problem) {
    request->problem = problem;
    return limit;
}

tb_limit tb_check_framing(tb_request *request, const char *method, const char *version) {
    size_t version_length = strlen(version);
    tb_head_scan scan = {.line_start = version + version_length};
    MHD_get_connection_values(request->connection, MHD_HEADER_KIND, tb_scan_header, &scan);
    request->header_bytes = scan.bytes;
    // Without a version (no target) libmicrohttpd has answered already; so it has a target here.
    if (version_length > 0 && request->raw_target != NULL &&
        (size_t)(version - 1 - request->raw_target) != request->target_length) {
        return tb_refuse(request, TB_LIMIT_MALFORMED, "The request target contains a NUL byte.");
    }
    if (!tb_method_is_token(method, request->raw_target)) {
        return tb_refuse(request, TB_LIMIT_MALFORMED, "The request method is not a token.");
    }
    const union MHD_ConnectionInfo *size =
        MHD_get_connection_info(request->connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    // The head ends with the last line's ending and an empty line: two to four bytes.
    if (!scan.broken && size != NULL) {
        const char *end = method + size->header_size;
        scan.broken = end < scan.line_start + 2 || end > scan.line_start + 4;
    }
    if (scan.broken) {
        return tb_refuse(request, TB_LIMIT_MALFORMED,
                         "A request header contains a NUL byte or is folded over several lines.");
    }
    if (scan.space_in_name) {
        return tb_refuse(request, TB_LIMIT_MALFORMED,
                         "A request header has whitespace before its colon.");
    }
    if (scan.name_not_token) {
        return tb_refuse(request, TB_LIMIT_MALFORMED, "A request header's name has a character a name cannot have.");
    }
    if (scan.cr_in_value) {
        return tb_refuse(request, TB_LIMIT_MALFORMED, "A request header's value contains a carriage return not followed by a line feed.");
    }
    int http_1_0 = strcmp(version, MHD_HTTP_VERSION_1_0) == 0;
    if (scan.hosts > 1 || (scan.hosts == 0 && !http_1_0)) {
        return tb_refuse(request, TB_LIMIT_MALFORMED, "An HTTP/1.1 request needs exactly one Host header.");
    }
    if (!tb_take_absolute_form(request, scan.host)) {
        return tb_refuse(request, TB_LIMIT_MALFORMED, "The request target's authority is not the request's Host.");
    }
    if (scan.content_lengths > 1) {
        return tb_refuse(request, TB_LIMIT_MALFORMED, "Content-Length is given more than once.");
    }
    // Two credentials: which one names the caller would depend on who reads the request (a
    // gateway in front may believe the last, the server the first).
    if (scan.authorizations > 1) {
        return tb_refuse(request, TB_LIMIT_MALFORMED, "Authorization is given more than once.");
    }
    if (scan.transfer_encodings == 0) return TB_LIMIT_NONE;
    if (scan.content_lengths > 0) {
        return tb_refuse(request, TB_LIMIT_MALFORMED,
                         "A request must not have both Content-Length and Transfer-Encoding.");
    }
    if (http_1_0) {
        return tb_refuse(request, TB_LIMIT_MALFORMED, "An HTTP/1.0 request cannot use Transfer-Encoding.");
    }
    if (scan.transfer_encodings > 1 || !tb_ends_chunked(scan.transfer_encoding)) {
        return tb_refuse(request, TB_LIMIT_MALFORMED,
                         "Transfer-Encoding must be given once and end with chunked.");
    }
    if (strcasecmp(scan.transfer_encoding, "chunked") != 0) {
        return tb_refuse(request, TB_LIMIT_UNSUPPORTED,
                         "The only Transfer-Encoding accepted is chunked.");
    }
    return TB_LIMIT_NONE;
}
