import HTTPServer
import WireValues

/// `GET /session` describes the session, `GET /profile` says who the user is, and
/// `POST /revoke` ends the session at the provider and here.
struct SessionRoutes: Sendable {
    let callers: Callers
    let sessions: SessionOperations

    func register(in routes: inout RouteTable) {
        routes.add("GET", "/session", RoutePolicy(caller: .session, limit: .none(because: "a session token (256 random bits) cannot be guessed, and the answer comes from memory"), body: .none)) { [callers] request throws(HTTPError) in
            try callers.withBearerSession(request) { session throws(HTTPError) in .now(.json(.object([
                ("provider", .string(session.provider)),
                ("subject", .string(session.subject)),
                ("scopes", .array(session.scopes.map(JSONValue.string))),
                ("created_at", .string(Timestamp.format(seconds: Int(session.createdAt)))),
                ("access_token_expires_at", session.accessTokenExpiresAt.map { .string(Timestamp.format(seconds: Int($0))) } ?? .null),
                ("refreshable", .bool(session.refreshToken != nil)),
                // DPoP: the provider bound its token to the broker's key (only /proxy can use it).
                ("provider_token_type", .string(session.providerProofKey == nil ? "Bearer" : "DPoP")),
            ]))) }
        }
        routes.add("POST", "/revoke", RoutePolicy(caller: .session, limit: .none(because: "a session token (256 random bits) cannot be guessed, and a session ends once"), body: .none)) { [self] request throws(HTTPError) in
            try revoke(request)
        }
        routes.add("GET", "/profile", RoutePolicy(caller: .session, limit: .none(because: "a session token (256 random bits) cannot be guessed, and its profile is cached"), body: .none)) { [self] request throws(HTTPError) in
            try profile(request)
        }
    }

    /// Ends the session here, then at the provider (``SessionOperations/end(_:_:)``): what the
    /// provider said, or `queued` when it will be asked again until it confirms. Idempotent: an
    /// unknown session token is answered 200 with `not_attempted`. A session bound to a key ends
    /// only for a proof of it.
    private func revoke(_ request: Request) throws(HTTPError) -> Reply {
        let presented = try callers.presentedToken(request)
        let route = request.route
        return .deferredCatching { [callers, sessions] () async throws(HTTPError) -> Response in
            if let session = try await callers.load(presented.id) {
                try await callers.spendAnywhere(try callers.admit(presented, to: session, route: route), route: route)
            }
            let revocation: ProviderRevocation?
            do throws(StateWriteError) {
                revocation = try await sessions.end(presented.id, .revoked)
            } catch {
                throw error.httpError
            }
            return .json(.object([
                ("revoked", .bool(true)), ("provider_revocation", .string(revocation?.rawValue ?? "not_attempted")),
            ]))
        }
    }

    /// The user's profile (``SessionOperations/profile(of:)``), from the cache when it can.
    private func profile(_ request: Request) throws(HTTPError) -> Reply {
        try callers.withBearerSession(request) { [sessions] session throws(HTTPError) in
            if let cached = sessions.cachedProfile(of: session) { return .now(.json(cached)) }
            return .deferredCatching { () async throws(HTTPError) -> Response in
                do throws(ProfileFailure) {
                    return .json(try await sessions.profile(of: session))
                } catch {
                    throw error.httpError
                }
            }
        }
    }
}
