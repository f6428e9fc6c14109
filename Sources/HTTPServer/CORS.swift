/// Cross-origin access for browser apps (single-page apps calling the API with a session token).
/// Only configured origins are ever named; there is no wildcard and no cookie credentials —
/// the session token travels in the `Authorization` header.
enum CORS {
    /// The answer to a preflight (`OPTIONS` with `Access-Control-Request-Method`): 204, with
    /// permission only for an allowed origin (its other headers are added by the server).
    static func preflight(allowed: Bool) -> Response {
        Response(status: 204, headers: allowed ? [
            HTTPHeader("Access-Control-Allow-Methods", "GET, POST"),
            // DPoP: a browser app binds its session token to a key it keeps (docs/dpop.md).
            HTTPHeader("Access-Control-Allow-Headers", "Authorization, Content-Type, DPoP, X-Request-Id"),
            HTTPHeader("Access-Control-Max-Age", "600"),
        ] : [])
    }

    /// Headers that let `origin` read an answer.
    static func headers(origin: String) -> [HTTPHeader] {
        [
            HTTPHeader("Access-Control-Allow-Origin", origin),
            HTTPHeader("Vary", "Origin"),
            HTTPHeader("Access-Control-Expose-Headers", "WWW-Authenticate, Retry-After, DPoP-Nonce, X-Request-Id"),
        ]
    }
}
