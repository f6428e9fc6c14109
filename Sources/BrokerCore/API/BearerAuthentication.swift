import BrokerCrypto
import HTTPServer

extension BrokerServices {
    /// The session named by `Authorization: Bearer <session token>`. A missing, malformed or
    /// unknown token is a 401 (RFC 6750 §3); the token is never repeated in the answer.
    func authenticate(_ request: Request) throws(HTTPError) -> Session {
        let id = try sessionID(request)
        guard let session = state.session(id, now: now()) else {
            metrics.rejected(route: String(request.path), reason: "unknown_session_token")
            throw .invalidToken("The session token is unknown, expired or revoked.")
        }
        return session
    }

    /// The hash of the bearer session token, without looking it up.
    func sessionID(_ request: Request) throws(HTTPError) -> SHA256Digest {
        guard let header = request.header("Authorization") else {
            throw .invalidToken("Send the session token as Authorization: Bearer <token>.")
        }
        // "Bearer" is case-insensitive (RFC 7235 §2.1); checked without allocating, on the hot path.
        let utf8 = header.utf8
        guard utf8.count > 7, zip(utf8.prefix(7), "bearer ".utf8).allSatisfy({ $0 | 0x20 == $1 }) else {
            throw .invalidToken("The Authorization header is not a Bearer session token.")
        }
        let token = header.dropFirst(7)
        guard token.hasPrefix(OpaqueToken.sessionPrefix) else {
            throw .invalidToken("The Authorization header is not a Bearer session token.")
        }
        return OpaqueToken.hash(token)
    }
}

extension BrokerServices {
    /// Applies a per-client rate limit, counting refusals.
    func admit(_ request: Request, to limiter: RateLimiter, route: String) throws(HTTPError) {
        do {
            try limiter.admit(request.clientIP, now: now())
        } catch {
            metrics.rejected(route: route, reason: "rate_limited")
            throw error
        }
    }
}
