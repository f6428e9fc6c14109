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
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer",
              parts[1].hasPrefix(OpaqueToken.sessionPrefix) else {
            throw .invalidToken("The Authorization header is not a Bearer session token.")
        }
        return OpaqueToken.hash(parts[1])
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
