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

    func register(in router: inout Router) {
        router.add("POST", "/token") { [self] request throws(HTTPError) in
            try services.admit(request, to: services.tokenLimiter)
            let form = try request.form()
            return .deferredCatching { [self] () async throws(HTTPError) -> Response in try await redeem(form) }
        }
        router.add("GET", "/token") { [self] request throws(HTTPError) in try current(request) }
        router.add("POST", "/refresh") { [self] request throws(HTTPError) in
            let client = request.clientIP
            return try services.withBearerSession(request) { [self] session throws(HTTPError) in
                try services.admit(client: client, to: services.refreshLimiter, route: "/refresh")
                return refreshed(session.id, force: true, minimumValidity: services.refreshSkew)
            }
        }
    }

    /// The hot path: a fresh token is answered from memory on the server thread, built where
    /// the session lies. An unknown session is a 401 before a bad `min_ttl` is a 400.
    private func current(_ request: Request) throws(HTTPError) -> Reply {
        let id = try services.sessionID(request)
        let requested = Result { () throws(HTTPError) in try requestedValidity(request) }
        let minimumValidity = (try? requested.get()) ?? services.refreshSkew
        switch services.sessions.current(id, validFor: minimumValidity, { session, now in session.tokenAnswer(at: now) }) {
        case .unknownSession:
            let route = request.route
            guard !services.store.holdsEverySession else { throw services.unknownSession(route: route) }
            _ = try requested.get()
            let client = request.clientIP
            // A shared store's cache miss: the session from the store, then as above.
            return .deferredCatching { [services] () async throws(HTTPError) -> Response in
                guard let session = try await services.load(id) else { throw services.unknownSession(route: route) }
                try services.admitRefresh(early: services.sessions.refreshIsEarly(session, validFor: minimumValidity), client: client, route: route)
                do throws(RefreshFailure) {
                    return try await services.sessions.fresh(session, validFor: minimumValidity).tokenAnswer(at: services.now())
                } catch {
                    throw error.httpError
                }
            }
        case .fresh(let answer):
            _ = try requested.get()
            return .now(answer)
        case .refreshDue(let early):
            _ = try requested.get()
            try services.admitRefresh(early: early, client: request.clientIP, route: request.route)
            return refreshed(id, force: false, minimumValidity: minimumValidity)
        }
    }

    /// How long the handed-out token must stay valid: the refresh skew, or `min_ttl` if longer.
    private func requestedValidity(_ request: Request) throws(HTTPError) -> Double {
        guard let text = try request.query().optional("min_ttl") else { return services.refreshSkew }
        guard let minTTL = Int(text), (0...86_400).contains(minTTL) else {
            throw .badRequest("min_ttl must be a number of seconds from 0 to 86400.")
        }
        return max(services.refreshSkew, Double(minTTL))
    }

    private func refreshed(_ id: SHA256Digest, force: Bool, minimumValidity: Double) -> Reply {
        .deferredCatching { [self] () async throws(HTTPError) -> Response in try await refresh(id, force: force, minimumValidity: minimumValidity) }
    }

    private func refresh(_ id: SHA256Digest, force: Bool, minimumValidity: Double) async throws(HTTPError) -> Response {
        do throws(RefreshFailure) {
            return try await services.sessions.refresh(id, force: force, minimumValidity: minimumValidity).tokenAnswer(at: services.now())
        } catch {
            if case .tooSoon = error { services.metrics.rejected(route: "/refresh", reason: "refreshed_moments_ago") }
            throw error.httpError
        }
    }

    /// Redeems a handoff code (``LoginFlow/redeem(_:)``): the new session's token, or the
    /// current token of the session an incremental authorization merged into.
    private func redeem(_ form: FormFields) async throws(HTTPError) -> Response {
        switch try form.required("grant_type") {
        case "authorization_code": break
        case DeviceRoutes.grantType: return try await poll(form)
        default:
            throw .badRequest("grant_type must be authorization_code or \(DeviceRoutes.grantType).", code: "unsupported_grant_type")
        }
        let request = HandoffRedemptionRequest(
            code: try form.required("code"), verifier: try form.required("code_verifier"),
            redirectURI: try form.required("redirect_uri"), app: try form.required("app")
        )
        do throws(HandoffRefusal) {
            let redeemed = try await services.login.redeem(request)
            return redeemed.session.tokenAnswer(at: services.now(), sessionToken: redeemed.token)
        } catch {
            throw error.httpError
        }
    }

    /// A device's poll (RFC 8628 §3.4): the same answer as a redeemed handoff code once its user
    /// has signed in, else §3.5's error.
    private func poll(_ form: FormFields) async throws(HTTPError) -> Response {
        let deviceCode = try form.required("device_code")
        guard let app = try DeviceRoutes.app(form) else {
            throw .badRequest("Missing parameter: app (or client_id).")
        }
        do throws(DevicePollRefusal) {
            let redeemed = try await services.devices.poll(deviceCode: deviceCode, app: app)
            return redeemed.session.tokenAnswer(at: services.now(), sessionToken: redeemed.token)
        } catch {
            throw error.httpError
        }
    }
}
