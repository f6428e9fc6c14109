/// Cross-origin access for browser apps (single-page apps calling the API with a session token).
/// Only configured origins are ever named; there is no wildcard and no cookie credentials —
/// the session token travels in the `Authorization` header.
enum CORS {
    /// The answer to a preflight (`OPTIONS` with `Access-Control-Request-Method`): 204, with
    /// permission only for an allowed origin (its other headers are added by the server).
    /// The methods and request headers are those of the broker's API and of its API proxy, which
    /// passes any method and the conditional, range and trace headers to an API.
    static func preflight(allowed: Bool) -> Response {
        Response(status: 204, headers: allowed ? [
            HTTPHeader("Access-Control-Allow-Methods", "GET, HEAD, POST, PUT, PATCH, DELETE"),
            // DPoP: a browser app binds its session token to a key it keeps (docs/dpop.md).
            HTTPHeader("Access-Control-Allow-Headers", "Authorization, Content-Type, DPoP, X-Request-Id, traceparent, tracestate, "
                + "If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since, If-Range, Range"),
            HTTPHeader("Access-Control-Max-Age", "600"),
        ] : [])
    }

    /// What a script may read of an answer: the broker's own headers, and those the API proxy
    /// passes back from an API (validators, links, ranges, the common rate-limit headers).
    private static let exposed = [
        "WWW-Authenticate", "Retry-After", "DPoP-Nonce", "X-Request-Id",
        "ETag", "Last-Modified", "Link", "Location", "Content-Disposition", "Content-Range", "Accept-Ranges", "Allow",
        "RateLimit", "RateLimit-Policy", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset",
        "RateLimit-Observed", "RateLimit-ResetTime",
        "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Used", "X-RateLimit-Resource",
        "X-Rate-Limit-Limit", "X-Rate-Limit-Remaining", "X-Rate-Limit-Reset",
    ].joined(separator: ", ")

    /// Headers that let `origin` read an answer.
    static func headers(origin: String) -> [HTTPHeader] {
        [
            HTTPHeader("Access-Control-Allow-Origin", origin),
            HTTPHeader("Vary", "Origin"),
            HTTPHeader("Access-Control-Expose-Headers", exposed),
        ]
    }
}
