import BrokerCrypto
import HTTPServer
import WireValues

extension Callers {
    /// Runs `then` with the session named by `Authorization: Bearer <session token>` (or `DPoP
    /// <session token>` with its proof, for a session bound to a key: ``presentedToken(_:)``): at
    /// once when this instance has it in memory; else, with a store shared by several instances (a
    /// cache miss), once it is loaded from the store, the request suspended meanwhile. A missing,
    /// malformed or unknown token, or one presented otherwise than its session is bound, is a 401
    /// (RFC 6750 §3, RFC 9449 §7.1); the token is never repeated in the answer.
    func withBearerSession(_ request: Request, _ then: @escaping @Sendable (Session) throws(HTTPError) -> Reply) throws(HTTPError) -> Reply {
        let presented = try presentedToken(request)
        let route = request.route
        if let session = store.session(presented.id, now: now()) {
            guard let unrecorded = try admit(presented, to: session, route: route) else { return try then(session) }
            return .deferredCatching { [self] () async throws(HTTPError) -> Response in
                try await spendAnywhere(unrecorded, route: route)
                return try await then(session).response()
            }
        }
        guard !store.holdsEverySession else { throw unknownSession(presented, route: route) }
        return .deferredCatching { [self] () async throws(HTTPError) -> Response in
            guard let session = try await load(presented.id) else { throw unknownSession(presented, route: route) }
            try await spendAnywhere(try admit(presented, to: session, route: route), route: route)
            return try await then(session).response()
        }
    }

    /// The session `id`, from memory or else the store (``StateStore/findSession(_:now:)``); a
    /// store out of reach is a 503.
    func load(_ id: SHA256Digest) async throws(HTTPError) -> Session? {
        do throws(StateReadError) {
            return try await store.findSession(id, now: now())
        } catch {
            throw error.httpError
        }
    }

    /// The 401 for a session token that names no live session, counted. One sent in the DPoP
    /// scheme is challenged in both (RFC 9449 §7.1, §7.2), else in `Bearer`.
    func unknownSession(_ presented: PresentedToken, route: String) -> HTTPError {
        metrics.rejected(route: route, reason: "unknown_session_token")
        let description = "The session token is unknown, expired or revoked."
        return presented.claimed == nil ? .invalidToken(description) : .unknownInDPoPScheme(description)
    }

    /// `bearer ` and `dpop ` in lowercase ASCII.
    private static let bearerScheme: [UInt8] = Array("bearer ".utf8)
    private static let dpopScheme: [UInt8] = Array("dpop ".utf8)

    /// The scheme a session token comes in.
    enum TokenScheme {
        case bearer, dpop
    }

    /// The hash of the session token and its scheme, without looking it up. Read from the
    /// header's bytes where they lie: this runs on every `GET /token`.
    func sessionID(_ request: Request) throws(HTTPError) -> (SHA256Digest, TokenScheme) {
        try request.withHeaderBytes("Authorization") { header throws(HTTPError) in
            guard let header else {
                throw .invalidToken("Send the session token as Authorization: Bearer <token>.")
            }
            // Schemes are case-insensitive (RFC 7235 §2.1).
            let scheme: TokenScheme
            if header.count > 7, zip(header.prefix(7), Self.bearerScheme).allSatisfy({ $0 | 0x20 == $1 }) {
                scheme = .bearer
            } else if header.count > 5, zip(header.prefix(5), Self.dpopScheme).allSatisfy({ $0 | 0x20 == $1 }) {
                scheme = .dpop
            } else {
                throw .invalidToken("The Authorization header is not a Bearer or DPoP session token.")
            }
            let token = UnsafeRawBufferPointer(rebasing: header[(scheme == .bearer ? 7 : 5)...])
            guard token.starts(with: OpaqueToken.sessionPrefix.utf8) else {
                let description = "The Authorization header is not a Bearer or DPoP session token."
                throw scheme == .bearer ? .invalidToken(description) : .unknownInDPoPScheme(description)
            }
            return (SHA256.hash(token), scheme)
        }
    }
}
