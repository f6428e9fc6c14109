import Foundation
import HTTPServer
import WireValues

/// The standard token endpoint (`/providers/{provider}/token`: RFC 6749 §4.1.3 and §6, the
/// device grant of RFC 8628 §3.4; answers as §5), device authorization endpoint
/// (`/providers/{provider}/device_authorization`, RFC 8628 §3.1) and revocation endpoint
/// (`/providers/{provider}/revoke`, RFC 7009) of ``StandardOAuthRoutes``, for public clients.
/// The app's refresh token is its broker session token; its access token is the provider's,
/// refreshed upstream when due by the same rules as `GET /token`.
struct StandardTokenRoutes: Sendable {
    /// The grants of the standard token endpoint, each the handler every endpoint offering it uses.
    let grants: GrantTypes
    let sessions: SessionOperations
    let callers: Callers
    let admission: Admission
    let config: BrokerConfig
    /// The device authorization endpoint answers as `POST /device/authorize` does.
    let devices: DeviceRoutes
    /// The nonce an app may ask for with a revocation's proof.
    let rules: GrantProofRules

    func register(in routes: inout RouteTable) {
        for provider in config.providers.map(\.id) {
            routes.add("POST", "/providers/\(provider)/token", RoutePolicy(
                caller: .app, limit: .inHandler("token_requests_per_minute, charged per refused code (GrantLimit)"), body: .form
            )) { [self] request throws(HTTPError) in
                let form = try request.form()
                let grant = try grants.grant(form, client: TokenClient(id: try clientID(request, form), parameter: "client_id"))
                let limit = try GrantLimit(grant, request, admission)
                let proof = try callers.tokenRequestProof(request)
                let route = request.route
                let lifetimes = config.sessions.lifetimes
                return .deferredCatching { [callers] () async throws(HTTPError) -> Response in
                    let granted = try await GrantLimit.carryOut(grant, at: provider, proof: proof, under: limit, route: route, callers)
                    return try granted.session.standardTokenAnswer(at: callers.now(), refreshToken: granted.token,
                                                                  sessionEnd: lifetimes.end(of: granted.session))
                }
            }
            routes.add("POST", "/providers/\(provider)/revoke", RoutePolicy(
                caller: .app, limit: .none(because: "a session token (256 random bits) cannot be guessed, and a session ends once"), body: .form
            )) { [self] request throws(HTTPError) in
                let form = try request.form()
                let proof = try callers.tokenRequestProof(request)
                return revoke(try form.required("token"), client: try clientID(request, form), provider: provider, proof: proof)
            }
            // RFC 8628 §3.1 at this issuer: the provider is the issuer's.
            routes.add("POST", "/providers/\(provider)/device_authorization", admission.signInPolicy(.app, body: .form)) {
                [self] request throws(HTTPError) in
                let form = try request.form()
                let client = try TokenClient(id: try clientID(request, form), parameter: "client_id").required()
                return try devices.authorize(app: client, provider: provider, scopes: try SignInStart.scopes(form), route: request.route)
            }
        }
    }

    /// The public client: `client_id` in the body, or HTTP Basic with the client id and an
    /// empty password (RFC 6749 §2.3.1) — never a secret, in the header or as `client_secret` in
    /// the body (an empty one is none); the same if both are given. Nil when the request names
    /// none.
    private func clientID(_ request: Request, _ form: FormFields) throws(HTTPError) -> String? {
        let basic = try Self.basicClientID(request)
        if form["client_secret"]?.isEmpty == false { throw Self.publicClientsHaveNoSecret }
        let named = try form.optional("client_id")
        if let basic, let named, basic != named { throw .badRequest("client_id and the Authorization header name different clients.") }
        guard let client = basic ?? named else { return nil }
        guard config.app(id: client) != nil else { throw Self.invalidClient("Unknown client_id.") }
        return client
    }

    /// The client id of an `Authorization: Basic` header; nil without one (another scheme, such
    /// as a bearer token sent along, is not client authentication and is ignored).
    private static func basicClientID(_ request: Request) throws(HTTPError) -> String? {
        guard let header = request.header("Authorization"), header.prefix(6).lowercased() == "basic " else { return nil }
        guard let decoded = Data(base64Encoded: String(header.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
              let text = String(data: decoded, encoding: .utf8), let colon = text.firstIndex(of: ":"),
              let client = try? FormFields.unescape(String(text[..<colon])) else {
            throw invalidClient("The Authorization header is not HTTP Basic client authentication.")
        }
        guard text[text.index(after: colon)...].isEmpty else { throw publicClientsHaveNoSecret }
        return client
    }

    private static let publicClientsHaveNoSecret = invalidClient("Clients of the broker are public: they have no secret to send.")

    private static func invalidClient(_ description: String) -> HTTPError {
        HTTPError(status: 401, code: "invalid_client", description: description,
                  headers: [HTTPHeader("WWW-Authenticate", #"Basic realm="token-broker""#)])
    }

    /// RFC 7009: a session token ends its session here and at the provider (the broker's `POST
    /// /revoke`). The token names its client, as at the refresh grant: `client_id` may be left
    /// out, and a token of another client than the one named stays. A token the broker does not
    /// know, or another client's, is answered 200 as well (§2.2): the answer never tells whether
    /// a token exists. A token bound to a key (DPoP) is revoked only with a proof of it (a 400
    /// `invalid_dpop_proof` otherwise, as at the refresh grant).
    private func revoke(_ token: String, client: String?, provider: String, proof: DPoPProof?) -> Reply {
        guard token.hasPrefix(OpaqueToken.sessionPrefix) else { return .now(Response(status: 200)) }
        let id = OpaqueToken.hash(token)
        return .deferredCatching { [callers, sessions, rules] () async throws(HTTPError) -> Response in
            if let proof, try await !callers.firstAnywhere(proof) {
                throw .badRequest(DPoPProofError.replayed.description, code: "invalid_dpop_proof")
            }
            let found = try await callers.load(id)
            guard let session = found, client.map({ session.app == $0 }) ?? true, session.provider == provider else { return Response(status: 200) }
            do throws(GrantRefusal) {
                try rules.requireNonce(proof, app: session.app)
            } catch {
                throw error.httpError
            }
            if session.keyThumbprint != nil, session.mismatch(proof: proof) != nil {
                throw .badRequest("The token is bound to a key: send a DPoP proof of it with the revocation request.", code: "invalid_dpop_proof")
            }
            do throws(StateWriteError) {
                _ = try await sessions.end(id, .revoked)
            } catch {
                throw error.httpError
            }
            return Response(status: 200)
        }
    }
}
