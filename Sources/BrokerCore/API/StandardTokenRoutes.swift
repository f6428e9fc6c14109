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
    let services: BrokerServices

    func register(in router: inout Router) {
        for provider in services.config.providers.map(\.id) {
            router.add("POST", "/providers/\(provider)/token") { [self] request throws(HTTPError) in
                let form = try request.form()
                let client = try clientID(request, form)
                switch try form.required("grant_type") {
                case "authorization_code":
                    let client = try required(client)
                    try services.admit(request, to: services.tokenLimiter)
                    return .deferredCatching { [self] () async throws(HTTPError) -> Response in try await exchange(form, client: client, provider: provider) }
                case "refresh_token":
                    // A public client's refresh token names its app: client_id may be left out
                    // (requests-oauthlib sends none); one that names another app is refused.
                    let token = try form.required("refresh_token")
                    let scope = try form.optional("scope")
                    return .deferredCatching { [self] () async throws(HTTPError) -> Response in
                        try await refresh(token, scope: scope, client: client, provider: provider)
                    }
                case DeviceRoutes.grantType:
                    let client = try required(client)
                    try services.admit(request, to: services.tokenLimiter)
                    let deviceCode = try form.required("device_code")
                    return .deferredCatching { [self] () async throws(HTTPError) -> Response in
                        try await poll(deviceCode, client: client, provider: provider)
                    }
                default:
                    throw .badRequest("grant_type must be authorization_code, refresh_token or \(DeviceRoutes.grantType).",
                                      code: "unsupported_grant_type")
                }
            }
            router.add("POST", "/providers/\(provider)/revoke") { [self] request throws(HTTPError) in
                let form = try request.form()
                let client = try required(try clientID(request, form))
                return revoke(try form.required("token"), client: client, provider: provider)
            }
            // RFC 8628 §3.1 at this issuer: the provider is the issuer's.
            router.add("POST", "/providers/\(provider)/device_authorization") { [self] request throws(HTTPError) in
                try services.admit(request, to: services.loginLimiter)
                let form = try request.form()
                let client = try required(try clientID(request, form))
                return try DeviceRoutes(services: services).authorize(app: client, provider: provider, scopes: try BrokerServices.scopes(form))
            }
        }
    }

    /// The public client: `client_id` in the body, or HTTP Basic with the client id and an
    /// empty password (RFC 6749 §2.3.1) — never a secret; the same if both are given. Nil when
    /// the request names none.
    private func clientID(_ request: Request, _ form: FormFields) throws(HTTPError) -> String? {
        let basic = try Self.basicClientID(request)
        let named = try form.optional("client_id")
        if let basic, let named, basic != named { throw .badRequest("client_id and the Authorization header name different clients.") }
        guard let client = basic ?? named else { return nil }
        guard services.config.app(id: client) != nil else { throw Self.invalidClient("Unknown client_id.") }
        return client
    }

    /// The client a grant needs named.
    private func required(_ client: String?) throws(HTTPError) -> String {
        guard let client else { throw .badRequest("client_id is required.") }
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
        guard text[text.index(after: colon)...].isEmpty else {
            throw invalidClient("Clients of the broker are public: they have no secret to send.")
        }
        return client
    }

    private static func invalidClient(_ description: String) -> HTTPError {
        HTTPError(status: 401, code: "invalid_client", description: description,
                  headers: [HTTPHeader("WWW-Authenticate", #"Basic realm="token-broker""#)])
    }

    /// RFC 6749 §4.1.3: a handoff code of this provider's login, for its client, with its PKCE
    /// verifier; the answer carries the new session token as the refresh token.
    private func exchange(_ form: FormFields, client: String, provider: String) async throws(HTTPError) -> Response {
        let request = HandoffRedemptionRequest(
            code: try form.required("code"), verifier: try form.required("code_verifier"),
            redirectURI: try form.required("redirect_uri"), app: client
        )
        let redeemed: RedeemedSession
        do throws(HandoffRefusal) {
            redeemed = try await services.login.redeem(request)
        } catch {
            switch error {
            case .unsaved, .malformedVerifier: throw error.httpError
            default: throw .badRequest(error.httpError.description, code: "invalid_grant")
            }
        }
        guard redeemed.session.provider == provider else {
            // Sent to another issuer's token endpoint: the new session is not handed out.
            if redeemed.token != nil { _ = try? await services.sessions.revoke(redeemed.session.id) }
            throw .badRequest("The code was issued by another issuer.", code: "invalid_grant")
        }
        return redeemed.session.standardTokenAnswer(at: services.now(), refreshToken: redeemed.token)
    }

    /// RFC 6749 §6: the session's current access token, refreshed at the provider when it is
    /// due (with the refresher's single-flight), and the same refresh token.
    private func refresh(_ token: String, scope: String?, client: String?, provider: String) async throws(HTTPError) -> Response {
        let invalid = HTTPError.badRequest("The refresh token is unknown, expired or revoked, or was issued to another client.",
                                           code: "invalid_grant")
        guard token.hasPrefix(OpaqueToken.sessionPrefix) else { throw invalid }
        let id = OpaqueToken.hash(token)
        let found = try await services.load(id)
        guard let session = found, session.app == client ?? session.app, session.provider == provider else { throw invalid }
        if let scope, !Set(scope.split(separator: " ").map(String.init)).isSubset(of: session.scopes) {
            throw .badRequest("scope may only name scopes the grant has.", code: "invalid_scope")
        }
        // A standard client refreshes when its token is due: never refused per address.
        do throws(RefreshFailure) {
            return try await services.sessions.fresh(session, validFor: services.refreshSkew).standardTokenAnswer(at: services.now(), refreshToken: token)
        } catch {
            switch error {
            case .loginRequired, .gone:
                throw .badRequest("The provider no longer honours this sign-in; sign in again.", code: "invalid_grant")
            case .tooSoon, .failed, .unsaved:
                throw error.httpError
            }
        }
    }

    /// RFC 8628 §3.4–3.5 at this issuer: the device's session once its user has signed in,
    /// answered as this endpoint answers a code (`refresh_token` = the session token), else the
    /// error the device acts on. A code issued for another issuer's provider gets nothing.
    private func poll(_ deviceCode: String, client: String, provider: String) async throws(HTTPError) -> Response {
        let redeemed: RedeemedSession
        do throws(DevicePollRefusal) {
            redeemed = try await services.devices.poll(deviceCode: deviceCode, app: client)
        } catch {
            throw error.httpError
        }
        guard redeemed.session.provider == provider else {
            _ = try? await services.sessions.revoke(redeemed.session.id)
            throw .badRequest("The device code was issued by another issuer.", code: "invalid_grant")
        }
        return redeemed.session.standardTokenAnswer(at: services.now(), refreshToken: redeemed.token)
    }

    /// RFC 7009: a session token of this client ends its session here and at the provider (the
    /// broker's `POST /revoke`). A token the broker does not know, or another client's (which
    /// stays), is answered 200 as well (§2.2): the answer never tells whether a token exists.
    private func revoke(_ token: String, client: String, provider: String) -> Reply {
        guard token.hasPrefix(OpaqueToken.sessionPrefix) else { return .now(Response(status: 200)) }
        let id = OpaqueToken.hash(token)
        return .deferredCatching { [services] () async throws(HTTPError) -> Response in
            let found = try await services.load(id)
            guard let session = found, session.app == client, session.provider == provider else { return Response(status: 200) }
            do throws(StateWriteError) {
                _ = try await services.sessions.revoke(id)
            } catch {
                throw error.httpError
            }
            return Response(status: 200)
        }
    }
}
