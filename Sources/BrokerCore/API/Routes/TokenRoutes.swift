import BrokerCrypto
import HTTPServer
import WireValues

/// `POST /token` redeems a handoff code or answers a device's poll (RFC 8628); `GET /token` hands out the current access token,
/// refreshing it first when it is about to expire; `POST /refresh` refreshes now. A refresh asked
/// for before it is due (`POST /refresh`, a `min_ttl` beyond the skew) counts against the
/// client's `refresh_requests_per_minute` (``BrokerServices/admitRefresh(early:client:route:)``), and the
/// refresher bounds refreshes per session (`Refresher`); a `GET /token` answered from memory does
/// neither.
struct TokenRoutes: Sendable {
    let services: BrokerServices

    /// `POST /token`'s grants: a handoff code (``LoginFlow/redeem(_:)``) — the new session's
    /// token, or the current token of the session an incremental authorization merged into —
    /// and a device's poll (RFC 8628); the same types as the standard token endpoint's.
    static let grants = GrantTypes(offered: [AuthorizationCodeGrant.self, DeviceCodeGrant.self])

    func register(in routes: inout RouteTable) {
        routes.add("POST", "/token", RoutePolicy(caller: .app, limit: .inHandler("token_requests_per_minute, charged per refused code (GrantLimit)"), body: .form)) { [services] request throws(HTTPError) in
            let form = try request.form()
            let grant = try Self.grants.grant(form, client: TokenClient(id: try DeviceRoutes.app(form), parameter: "app"))
            let limit = try GrantLimit(grant, request, services)
            let proof = try services.tokenRequestProof(request)
            let route = request.route
            return .deferredCatching { [services] () async throws(HTTPError) -> Response in
                let granted = try await GrantLimit.carryOut(grant, at: nil, proof: proof, under: limit, route: route, services)
                return granted.session.tokenAnswer(at: services.now(), sessionToken: granted.token)
            }
        }
        routes.add("GET", "/token", RoutePolicy(caller: .session, limit: .inHandler("refresh_requests_per_minute, for refreshes asked for early"), body: .none)) { [self] request throws(HTTPError) in
            try current(request)
        }
        routes.add("POST", "/refresh", RoutePolicy(caller: .session, limit: .inHandler("refresh_requests_per_minute, once the session is known"), body: .none)) { [self] request throws(HTTPError) in
            let client = request.clientIP
            return try services.withBearerSession(request) { [self] session throws(HTTPError) in
                try services.admit(client: client, to: services.refreshLimiter, route: "/refresh")
                return .deferredCatching { [self] () async throws(HTTPError) -> Response in
                    try await refresh(session.id, force: true, minimumValidity: services.refreshSkew)
                }
            }
        }
    }

    /// The hot path: a fresh token is answered from memory on the server thread, built where
    /// the session lies. An unknown session is a 401 before a bad `min_ttl` is a 400. A session
    /// bound to a key answers only a proof of it (``BrokerServices/admit(_:to:route:)``), each
    /// proof once: with a store several instances share, the answer waits for the store to record
    /// the proof. A session whose provider bound its token to the broker's key (DPoP) has nothing
    /// to hand out: a 409 that names the proxy, and no refresh.
    private func current(_ request: Request) throws(HTTPError) -> Reply {
        let presented = try services.presentedToken(request)
        let route = request.route
        let requested = Result { () throws(HTTPError) in try requestedValidity(request) }
        let minimumValidity = (try? requested.get()) ?? services.refreshSkew
        switch services.sessions.current(presented.id, holder: presented.holder, validFor: minimumValidity, { session, now in
            (session.providerProofKey == nil ? session.tokenAnswer(at: now) : tokenBound(session.provider).response,
             session.keyThumbprint.map { (bound: $0, app: session.app) })
        }) {
        case .unknownSession:
            guard !services.store.holdsEverySession else { throw services.unknownSession(route: route) }
            _ = try requested.get()
            let client = request.clientIP
            // A shared store's cache miss: the session from the store, then as above.
            return .deferredCatching { [self, services] () async throws(HTTPError) -> Response in
                let loaded: (session: Session, decision: SessionOperations.CurrentToken<Void>)?
                do throws(StateReadError) {
                    loaded = try await services.sessions.currentLoaded(presented.id, holder: presented.holder, validFor: minimumValidity)
                } catch {
                    throw error.httpError
                }
                guard let (session, decision) = loaded else { throw services.unknownSession(route: route) }
                let early: Bool?
                switch decision {
                case .unknownSession: throw services.unknownSession(route: route)
                case .wrongHolder(let mismatch): throw services.holderRefused(mismatch, route: route)
                case .fresh: early = nil
                case .refreshDue(let isEarly): early = isEarly
                }
                try await services.spendAnywhere(try services.admit(presented, to: session, route: route), route: route)
                if session.providerProofKey != nil { throw tokenBound(session.provider) }
                guard let early else { return session.tokenAnswer(at: services.now()) }
                try services.admitRefresh(early: early, client: client, route: route)
                return try await refresh(presented.id, force: false, minimumValidity: minimumValidity)
            }
        case .wrongHolder(let mismatch):
            throw services.holderRefused(mismatch, route: route)
        case .fresh(let (answer, binding)):
            _ = try requested.get()
            guard let claimed = presented.claimed, let binding,
                  let unrecorded = try services.checkedProof(claimed, tokenHash: presented.id, boundTo: binding.bound, app: binding.app, route: route)
            else { return .now(answer) }
            return .deferredCatching { [services] () async throws(HTTPError) -> Response in
                try await services.spendAnywhere(unrecorded, route: route)
                return answer
            }
        case .refreshDue(let early):
            _ = try requested.get()
            // A bound session's proof, and its provider's binding, checked on the session as it
            // is now: this rare branch looks it up again.
            let session = services.store.session(presented.id, now: services.now())
            let unrecorded = try session.flatMap { session throws(HTTPError) in try services.admit(presented, to: session, route: route) }
            if let session, session.providerProofKey != nil {
                guard let unrecorded else { throw tokenBound(session.provider) }
                return .deferredCatching { [services] () async throws(HTTPError) -> Response in
                    try await services.spendAnywhere(unrecorded, route: route)
                    throw tokenBound(session.provider)
                }
            }
            try services.admitRefresh(early: early, client: request.clientIP, route: route)
            return .deferredCatching { [self] () async throws(HTTPError) -> Response in
                try await services.spendAnywhere(unrecorded, route: route)
                return try await refresh(presented.id, force: false, minimumValidity: minimumValidity)
            }
        }
    }

    /// The 409 of a session whose provider bound its token to the broker's key.
    private func tokenBound(_ provider: String) -> HTTPError {
        .providerTokenBound(provider: provider, proxied: services.config.provider(id: provider)?.apiBaseURL != nil)
    }

    /// How long the handed-out token must stay valid: the refresh skew, or `min_ttl` if longer.
    private func requestedValidity(_ request: Request) throws(HTTPError) -> Double {
        guard let text = try request.query().optional("min_ttl") else { return services.refreshSkew }
        guard let minTTL = Int(text), (0...86_400).contains(minTTL) else {
            throw .badRequest("min_ttl must be a number of seconds from 0 to 86400.")
        }
        return max(services.refreshSkew, Double(minTTL))
    }

    private func refresh(_ id: SHA256Digest, force: Bool, minimumValidity: Double) async throws(HTTPError) -> Response {
        do throws(RefreshFailure) {
            return try await services.sessions.refresh(id, force: force, minimumValidity: minimumValidity).tokenAnswer(at: services.now())
        } catch {
            if case .tooSoon = error { services.metrics.rejected(route: "/refresh", reason: "refreshed_moments_ago") }
            throw error.httpError
        }
    }
}
