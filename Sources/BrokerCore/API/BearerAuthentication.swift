import BrokerCrypto
import HTTPServer
import WireValues

extension BrokerServices {
    /// The session named by `Authorization: Bearer <session token>`. A missing, malformed or
    /// unknown token is a 401 (RFC 6750 §3); the token is never repeated in the answer.
    func authenticate(_ request: Request) throws(HTTPError) -> Session {
        try withSession(sessionID(request), of: request) { copy $0 }
    }

    /// Runs `body` on the session `id` (of the bearer token of `request`) where it lies, without
    /// copying it (the hot path); unknown, it is the 401 of `authenticate`.
    func withSession<T: Sendable>(_ id: SHA256Digest, of request: Request, _ body: (borrowing Session) -> T) throws(HTTPError) -> T {
        guard let result = store.readSession(id, now: now(), body) else { throw unknownSession(request) }
        return result
    }

    /// The 401 for a session token that names no live session, counted.
    func unknownSession(_ request: Request) -> HTTPError {
        metrics.rejected(route: String(request.path), reason: "unknown_session_token")
        return .invalidToken("The session token is unknown, expired or revoked.")
    }

    /// `bearer ` in lowercase ASCII.
    private static let bearerScheme: [UInt8] = Array("bearer ".utf8)

    /// The hash of the bearer session token, without looking it up. Read from the header's
    /// bytes where they lie: this runs on every `GET /token`.
    func sessionID(_ request: Request) throws(HTTPError) -> SHA256Digest {
        try request.withHeaderBytes("Authorization") { header throws(HTTPError) in
            guard let header else {
                throw .invalidToken("Send the session token as Authorization: Bearer <token>.")
            }
            // "Bearer" is case-insensitive (RFC 7235 §2.1).
            guard header.count > 7, zip(header.prefix(7), Self.bearerScheme).allSatisfy({ $0 | 0x20 == $1 }) else {
                throw .invalidToken("The Authorization header is not a Bearer session token.")
            }
            let token = UnsafeRawBufferPointer(rebasing: header[7...])
            guard token.starts(with: OpaqueToken.sessionPrefix.utf8) else {
                throw .invalidToken("The Authorization header is not a Bearer session token.")
            }
            return SHA256.hash(token)
        }
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
