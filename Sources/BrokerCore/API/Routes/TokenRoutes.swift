import BrokerCrypto
import HTTPServer
import WireValues

/// `POST /token` redeems a handoff code or answers a device's poll (RFC 8628); `GET /token` hands out the current access token,
/// refreshing it first when it is about to expire; `POST /refresh` refreshes now. A refresh asked
/// for before it is due (`POST /refresh`, a `min_ttl` beyond the skew) counts against the
/// client's `refresh_requests_per_minute` (``Admission/admitRefresh(early:client:route:)``), and the
/// refresher bounds refreshes per session (`Refresher`); a `GET /token` answered from memory does
/// neither.
///
/// A class: a request's closures capture it, one reference rather than a retain per field.
final class TokenRoutes: Sendable {
    /// `POST /token`'s grants: a handoff code (``LoginFlow/redeem(_:)``) — the new session's
    /// token, or the current token of the session an incremental authorization merged into —
    /// and a device's poll (RFC 8628); the same handlers as the standard token endpoint's.
    let grants: GrantTypes
    let sessions: SessionOperations
    let callers: Callers
    let admission: Admission
    /// The providers whose tokens the API proxy can use (an `api_base_url`), for the 409 of a
    /// session whose provider token is bound to the broker's key.
    let proxied: Set<String>
    let metrics: BrokerMetrics

    init(grants: GrantTypes, sessions: SessionOperations, callers: Callers, admission: Admission, config: BrokerConfig, metrics: BrokerMetrics) {
        self.grants = grants
        self.sessions = sessions
        self.callers = callers
        self.admission = admission
        proxied = Set(config.providers.filter { $0.apiBaseURL != nil }.map(\.id))
        self.metrics = metrics
    }

    func register(in routes: inout RouteTable) {
        routes.add("POST", "/token", RoutePolicy(caller: .app, limit: .inHandler("token_requests_per_minute, charged per refused code (GrantLimit)"), body: .form)) { [grants, callers, admission] request throws(HTTPError) in
            let form = try request.form()
            let grant = try grants.grant(form, client: TokenClient(id: try DeviceRoutes.app(form), parameter: "app"))
            let limit = try GrantLimit(grant, request, admission)
            let proof = try callers.tokenRequestProof(request)
            let route = request.route
            return .deferredCatching { () async throws(HTTPError) -> Response in
                let granted = try await GrantLimit.carryOut(grant, at: nil, proof: proof, under: limit, route: route, callers)
                return granted.session.tokenAnswer(at: callers.now(), sessionToken: granted.token)
            }
        }
        routes.add("GET", "/token", RoutePolicy(caller: .session, limit: .inHandler("refresh_requests_per_minute, for refreshes asked for early"), body: .none)) { [self] request throws(HTTPError) in
            try current(request)
        }
        routes.add("POST", "/refresh", RoutePolicy(caller: .session, limit: .inHandler("refresh_requests_per_minute, once the session is known"), body: .none)) { [self] request throws(HTTPError) in
            let client = request.clientIP
            return try callers.withBearerSession(request) { [self] session throws(HTTPError) in
                try admission.admit(client: client, to: admission.refreshLimiter, route: "/refresh")
                return .deferredCatching { [self] () async throws(HTTPError) -> Response in
                    try await refresh(session.id, force: true, minimumValidity: sessions.refreshSkew)
                }
            }
        }
    }

    /// The hot path: a fresh token is answered from memory on the server thread, built where
    /// the session lies. An unknown session is a 401 before a bad `min_ttl` is a 400. A session
    /// bound to a key answers only a proof of it (``Callers/admit(_:to:route:)``), each
    /// proof once: with a store several instances share, the answer waits for the store to record
    /// the proof. A session whose provider bound its token to the broker's key (DPoP) has nothing
    /// to hand out: a 409 that names the proxy, and no refresh.
    private func current(_ request: Request) throws(HTTPError) -> Reply {
        let presented = try callers.presentedToken(request)
        let route = request.route
        let requested = Result { () throws(HTTPError) in try requestedValidity(request) }
        let minimumValidity = (try? requested.get()) ?? sessions.refreshSkew
        switch sessions.current(presented.id, holder: presented.holder, validFor: minimumValidity, { session, now in
            (session.providerProofKey == nil ? session.tokenAnswer(at: now) : tokenBound(session.provider).response,
             session.keyThumbprint.map { (bound: $0, app: session.app) }, marked: now - session.usedAt <= Session.useMarkInterval)
        }) {
        case .unknownSession:
            guard !callers.store.holdsEverySession else { throw callers.unknownSession(presented, route: route) }
            _ = try requested.get()
            return fromStore(presented, route: route, client: request.clientIP, minimumValidity: minimumValidity)
        case .wrongHolder(let mismatch):
            throw callers.holderRefused(mismatch, route: route)
        case .fresh(let (answer, binding, marked)):
            _ = try requested.get()
            var unrecorded: DPoPProof?
            if let claimed = presented.claimed, let binding {
                unrecorded = try callers.checkedProof(claimed, tokenHash: presented.id, boundTo: binding.bound, app: binding.app, route: route)
            }
            // Used once its holder checked out: a refused request keeps no session alive. A mark
            // less than a minute old stands (the hot path takes the session's lock once).
            if !marked { callers.store.noteUse(presented.id, now: callers.now()) }
            guard let unrecorded else { return .now(answer) }
            return .deferredCatching { [callers] () async throws(HTTPError) -> Response in
                try await callers.spendAnywhere(unrecorded, route: route)
                return answer
            }
        case .refreshDue(let early):
            _ = try requested.get()
            // A bound session's proof, and its provider's binding, checked on the session as it
            // is now: this rare branch looks it up again.
            guard let session = callers.store.session(presented.id, now: callers.now()) else {
                // Gone from memory between the two reads: from the store, proof checked, as any
                // miss (never a refresh without the proof).
                guard !callers.store.holdsEverySession else { throw callers.unknownSession(presented, route: route) }
                return fromStore(presented, route: route, client: request.clientIP, minimumValidity: minimumValidity)
            }
            let unrecorded = try callers.admit(presented, to: session, route: route)
            if session.providerProofKey != nil {
                guard let unrecorded else { throw tokenBound(session.provider) }
                return .deferredCatching { [self] () async throws(HTTPError) -> Response in
                    try await callers.spendAnywhere(unrecorded, route: route)
                    throw tokenBound(session.provider)
                }
            }
            try admission.admitRefresh(early: early, client: request.clientIP, route: route)
            return .deferredCatching { [self] () async throws(HTTPError) -> Response in
                try await callers.spendAnywhere(unrecorded, route: route)
                return try await refresh(presented.id, force: false, minimumValidity: minimumValidity)
            }
        }
    }

    /// A session this instance's memory lacks (a shared store's cache miss, or one dropped from
    /// it meanwhile): the session from the store, then as on the hot path — its holder's proof
    /// checked before anything is answered.
    private func fromStore(_ presented: PresentedToken, route: String, client: String, minimumValidity: Double) -> Reply {
        .deferredCatching { [self] () async throws(HTTPError) -> Response in
            let loaded: (session: Session, decision: SessionOperations.CurrentToken<Void>)?
            do throws(StateReadError) {
                loaded = try await sessions.currentLoaded(presented.id, holder: presented.holder, validFor: minimumValidity)
            } catch {
                throw error.httpError
            }
            guard let (session, decision) = loaded else { throw callers.unknownSession(presented, route: route) }
            let early: Bool?
            switch decision {
            case .unknownSession: throw callers.unknownSession(presented, route: route)
            case .wrongHolder(let mismatch): throw callers.holderRefused(mismatch, route: route)
            case .fresh: early = nil
            case .refreshDue(let isEarly): early = isEarly
            }
            try await callers.spendAnywhere(try callers.admit(presented, to: session, route: route), route: route)
            if session.providerProofKey != nil { throw tokenBound(session.provider) }
            guard let early else { return session.tokenAnswer(at: callers.now()) }
            try admission.admitRefresh(early: early, client: client, route: route)
            return try await refresh(presented.id, force: false, minimumValidity: minimumValidity)
        }
    }

    /// The 409 of a session whose provider bound its token to the broker's key.
    private func tokenBound(_ provider: String) -> HTTPError {
        .providerTokenBound(provider: provider, proxied: proxied.contains(provider))
    }

    /// How long the handed-out token must stay valid: the refresh skew, or `min_ttl` if longer.
    private func requestedValidity(_ request: Request) throws(HTTPError) -> Double {
        guard let text = try request.query().optional("min_ttl") else { return sessions.refreshSkew }
        guard let minTTL = Int(text), (0...86_400).contains(minTTL) else {
            throw .badRequest("min_ttl must be a number of seconds from 0 to 86400.")
        }
        return max(sessions.refreshSkew, Double(minTTL))
    }

    private func refresh(_ id: SHA256Digest, force: Bool, minimumValidity: Double) async throws(HTTPError) -> Response {
        do throws(RefreshFailure) {
            return try await sessions.refresh(id, force: force, minimumValidity: minimumValidity).tokenAnswer(at: sessions.now())
        } catch {
            if case .tooSoon = error { metrics.rejected(route: "/refresh", reason: "refreshed_moments_ago") }
            throw error.httpError
        }
    }
}
