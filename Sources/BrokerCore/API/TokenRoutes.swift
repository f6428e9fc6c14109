import BrokerCrypto
import HTTPServer
import Logging
import WireValues

/// `POST /token` redeems a handoff code; `GET /token` hands out the current access token,
/// refreshing it first when it is about to expire; `POST /refresh` refreshes now. A request that
/// would refresh counts against the client's `refresh_requests_per_minute`, and the refresher
/// bounds refreshes per session (`Refresher`); a `GET /token` answered from memory does neither.
struct TokenRoutes: Sendable {
    let services: BrokerServices

    func register(in router: inout Router) {
        router.add("POST", "/token") { [self] request throws(HTTPError) in
            try services.admit(request, to: services.tokenLimiter, route: "/token")
            let form = try request.form()
            return .deferredCatching { [self] () async throws(HTTPError) -> Response in try await redeem(form) }
        }
        router.add("GET", "/token") { [self] request throws(HTTPError) in try current(request) }
        router.add("POST", "/refresh") { [self] request throws(HTTPError) in
            let session = try services.authenticate(request)
            try services.admit(request, to: services.refreshLimiter, route: "/refresh")
            return refreshed(session.id, force: true, minimumValidity: services.refreshSkew)
        }
    }

    /// The hot path: a fresh token is answered from memory on the server thread, built where
    /// the session lies. An unknown session is a 401 before a bad `min_ttl` is a 400.
    private func current(_ request: Request) throws(HTTPError) -> Reply {
        let id = try services.sessionID(request)
        let requested = Result { () throws(HTTPError) in try requestedValidity(request) }
        let minimumValidity = (try? requested.get()) ?? services.refreshSkew
        let now = services.now()
        let fresh = try services.withSession(id, of: request) { session in
            session.accessTokenValid(for: minimumValidity, at: now) ? session.tokenAnswer(at: now) : nil
        }
        _ = try requested.get()
        guard let fresh else {
            try services.admit(request, to: services.refreshLimiter, route: "/token")
            return refreshed(id, force: false, minimumValidity: minimumValidity)
        }
        return .now(fresh)
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
        .deferredCatching { [services] () async throws(HTTPError) -> Response in
            let outcome = await services.refresher.refresh(id, force: force, minimumValidity: minimumValidity)
            if case .tooSoon = outcome { services.metrics.rejected(route: "/refresh", reason: "refreshed_moments_ago") }
            return try outcome.session().tokenAnswer(at: services.now())
        }
    }

    /// Redeems a handoff code (RFC 6749 §4.1.3 shape): once, by the app it was issued to, with
    /// the same redirect URI and the PKCE verifier of the app's challenge. The new session is on
    /// disk before its token is handed out.
    private func redeem(_ form: FormFields) async throws(HTTPError) -> Response {
        guard try form.required("grant_type") == "authorization_code" else {
            throw .badRequest("grant_type must be authorization_code.", code: "unsupported_grant_type")
        }
        let code = try form.required("code")
        let verifier = try form.required("code_verifier")
        let redirectURI = try form.required("redirect_uri")
        let app = try form.required("app")
        let codeID = OpaqueToken.hash(code)
        let now = services.now()
        let handoff: Handoff
        switch try await durably({ () async throws(StateWriteError) in try await services.store.redeemHandoff(codeID, now: now) }) {
        case .unknown, .expired:
            services.metrics.rejected(route: "/token", reason: "unknown_handoff_code")
            services.metrics.handoffRedemption(outcome: "unknown")
            throw .badRequest("The code is unknown or expired.", code: "invalid_grant")
        case .replayed(let sessionID):
            // A code used twice has leaked: end the session it created, here and at the provider,
            // where its first redeemer's access token would otherwise keep working (RFC 6749 §4.1.2).
            if let sessionID, let session = try await durably({ () async throws(StateWriteError) in try await services.store.removeSession(sessionID) }) {
                services.profiles.remove(sessionID)
                let revocation = await services.revokeAtProvider(session)
                services.logger.warning("handoff code replayed; its session was revoked", metadata: ["provider_revocation": "\(revocation.rawValue)"])
            }
            services.metrics.rejected(route: "/token", reason: "replayed_handoff_code")
            services.metrics.handoffRedemption(outcome: "replayed")
            throw .badRequest("The code was already used; its session has been revoked.", code: "invalid_grant")
        case .fresh(let found):
            handoff = found
        }
        guard handoff.app == app, handoff.redirectURI == redirectURI else {
            services.metrics.handoffRedemption(outcome: "rejected")
            throw .badRequest("The code was issued to another app or redirect_uri.", code: "invalid_grant")
        }
        guard PKCE.verify(verifier: verifier, challenge: handoff.appChallenge) else {
            services.metrics.rejected(route: "/token", reason: "wrong_code_verifier")
            services.metrics.handoffRedemption(outcome: "rejected")
            throw .badRequest("code_verifier does not match the code_challenge.", code: "invalid_grant")
        }
        services.metrics.handoffRedemption(outcome: "redeemed")
        guard let grant = handoff.grant else {
            // Incremental authorization: the grant is already in the app's session.
            guard let sessionID = handoff.sessionID, let session = services.store.session(sessionID, now: now) else {
                throw .invalidToken("The session token is unknown, expired or revoked.")
            }
            return session.tokenAnswer(at: now)
        }
        let token = OpaqueToken.make(prefix: OpaqueToken.sessionPrefix)
        let session = Session(id: OpaqueToken.hash(token), app: handoff.app, grant: grant, at: now)
        let kept = try await durably { () async throws(StateWriteError) in try await services.store.saveSession(session, createdBy: codeID) }
        guard kept else {
            // The code was replayed while this session was being made: it has leaked.
            _ = try await durably { () async throws(StateWriteError) in try await services.store.removeSession(session.id) }
            let revocation = await services.revokeAtProvider(grant.provider, accessToken: grant.accessToken, refreshToken: grant.refreshToken)
            services.logger.warning("handoff code replayed; its session was revoked", metadata: ["provider_revocation": "\(revocation.rawValue)"])
            throw .badRequest("The code was used twice; its session has been revoked.", code: "invalid_grant")
        }
        return session.tokenAnswer(at: now, sessionToken: token)
    }
}
