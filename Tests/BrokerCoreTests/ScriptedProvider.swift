import BrokerCrypto
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import WireValues

@testable import BrokerCore

/// An OpenID Connect provider inside the test process, reached through the broker's
/// `UpstreamTransport` seam instead of a socket: discovery, JWKS (ES256, the development
/// provider's signer), the token endpoint (authorization code with PKCE and client
/// authentication, rotating refresh tokens), userinfo and revocation. A test plays the user
/// with ``signIn(_:subject:)`` and scripts faults with the `next…` properties.
final class ScriptedProvider: UpstreamTransport, Sendable {
    static let issuer = "https://idp.test"
    static let clientID = "broker-client"
    static let clientSecret = "broker-secret"

    private struct Grant {
        var subject: String
        var scopes: [String]
    }

    private struct Code {
        let subject: String
        /// When the user signed in (``signIn(_:subject:)``).
        let signedInAt: Double
        let challenge: String
        let nonce: String?
        let scopes: [String]
        let redirectURI: String
    }

    private struct State {
        var codes: [String: Code] = [:]
        var accessTokens: [String: Grant] = [:]
        var refreshTokens: [String: Grant] = [:]
        var revoked: [String] = []
        var refreshes = 0
        var nextRefreshError: (status: Int, body: String)?
        var duringNextRefresh: (@Sendable () async -> Void)?
        var nextUserinfoUnauthorized = false
        var nextIDTokenNonce: String?
        var nextTokenType: String?
        var accessTokenLifetime = 3600
        var promisesIssuer = false
        var failingRevocations = 0
    }

    private let signer: DevelopmentSigner
    private let state = Mutex(State())
    private let clock: TestClock

    private init(signer: DevelopmentSigner, clock: TestClock) {
        self.signer = signer
        self.clock = clock
    }

    static func make(clock: TestClock) throws -> ScriptedProvider {
        ScriptedProvider(signer: try DevelopmentSigner.make(), clock: clock)
    }

    /// The provider as the broker's configuration names it: by issuer, with discovery.
    static func config(scopes: [String] = ["openid", "email"]) -> ProviderConfig {
        ProviderConfig(
            id: "idp", endpoints: .discovery(issuer: URL(string: issuer)!), clientID: clientID,
            clientAuthentication: .clientSecretBasic(Secret(clientSecret, source: "test")), scopes: scopes
        )
    }

    // MARK: What the test scripts and reads

    /// The user signs in at the authorization URL the broker built, and consents: the code the
    /// provider sends the browser back with, and the broker's `state` from that URL. With
    /// `authenticatedAt`, the provider reuses a session of its own that began then (its ID
    /// token's `auth_time`), as single sign-on does.
    func signIn(_ authorizationURL: String, subject: String, authenticatedAt: Double? = nil) throws -> (code: String, state: String) {
        let query = try FormFields(parsing: authorizationURL.split(separator: "?", maxSplits: 1).last ?? "")
        guard query["client_id"] == Self.clientID, query["code_challenge_method"] == "S256",
              let challenge = query["code_challenge"], let state = query["state"], let redirectURI = query["redirect_uri"] else {
            throw ScriptError("the authorization URL lacks a parameter")
        }
        let code = "code-" + UUID().uuidString
        let scopes = (query["scope"] ?? "").split(separator: " ").map(String.init)
        self.state.withLock {
            $0.codes[code] = Code(subject: subject, signedInAt: authenticatedAt ?? clock.seconds, challenge: challenge, nonce: query["nonce"], scopes: scopes,
                                  redirectURI: redirectURI)
        }
        return (code, state)
    }

    /// Tokens the revocation endpoint was asked to revoke, in order.
    var revoked: [String] { state.withLock { $0.revoked } }
    /// Access tokens issued, by code exchanges and refreshes.
    var accessTokensIssued: Int { state.withLock { $0.accessTokens.count } }
    /// Refresh grants answered (successfully or not).
    var refreshes: Int { state.withLock { $0.refreshes } }
    /// The next refresh answers this status and JSON body instead.
    func failNextRefresh(status: Int, body: String) { state.withLock { $0.nextRefreshError = (status, body) } }
    /// Runs `action` while the next refresh is at the provider, before it is answered.
    func duringNextRefresh(_ action: @escaping @Sendable () async -> Void) { state.withLock { $0.duringNextRefresh = action } }
    /// The next userinfo call answers 401, whatever the token.
    func rejectNextUserinfo() { state.withLock { $0.nextUserinfoUnauthorized = true } }
    /// The next ID token carries this nonce instead of the one the broker sent.
    func forgeNextNonce(_ nonce: String) { state.withLock { $0.nextIDTokenNonce = nonce } }

    /// The next tokens it issues say this `token_type`.
    func nameNextTokenType(_ type: String) { state.withLock { $0.nextTokenType = type } }
    /// Its discovery document says `authorization_response_iss_parameter_supported` (RFC 9207
    /// §3); call before the broker first reads it.
    func promiseIssuerInResponses() { state.withLock { $0.promisesIssuer = true } }
    /// The next `count` calls to the revocation endpoint answer 503 (the provider is down).
    func failRevocations(_ count: Int) { state.withLock { $0.failingRevocations = count } }
    /// The provider stops taking `token` (as when it expires early or is revoked on its side).
    func forget(_ token: String) { state.withLock { $0.accessTokens[token] = nil } }
    /// Whether `token` works at the userinfo endpoint now.
    func accepts(_ token: String) -> Bool { state.withLock { $0.accessTokens[token] != nil } }

    /// A JWT of `claims` signed with the provider's ID-token key, as it would sign a logout token.
    func signed(_ claims: JSONValue) throws -> String { try signer.sign(claims: claims) }

    // MARK: The transport

    func send(_ request: URLRequest) async throws(UpstreamError) -> UpstreamResponse {
        guard let url = request.url else { throw .unreachable(host: "?") }
        let form = (try? FormFields(parsing: String(decoding: request.httpBody ?? Data(), as: UTF8.self))) ?? FormFields()
        switch (request.httpMethod ?? "GET", url.path) {
        case ("GET", "/.well-known/openid-configuration"):
            let promisesIssuer = state.withLock { $0.promisesIssuer }
            return json(200, """
                {"issuer":"\(Self.issuer)","authorization_endpoint":"\(Self.issuer)/authorize","token_endpoint":"\(Self.issuer)/token",
                "userinfo_endpoint":"\(Self.issuer)/userinfo","revocation_endpoint":"\(Self.issuer)/revoke","jwks_uri":"\(Self.issuer)/jwks",
                "response_types_supported":["code"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["ES256"],
                "authorization_response_iss_parameter_supported":\(promisesIssuer)}
                """)
        case ("GET", "/jwks"):
            return json(200, signer.jwks)
        case ("POST", "/token"):
            guard authenticated(request) else { return json(401, #"{"error":"invalid_client"}"#) }
            return await token(form)
        case ("GET", "/userinfo"):
            return userinfo(request)
        case ("POST", "/revoke"):
            guard authenticated(request), let token = form["token"] else { return json(401, #"{"error":"invalid_client"}"#) }
            let revoked = state.withLock { state in
                guard state.failingRevocations == 0 else {
                    state.failingRevocations -= 1
                    return false
                }
                state.revoked.append(token)
                state.accessTokens[token] = nil
                state.refreshTokens[token] = nil
                return true
            }
            return revoked ? json(200, "{}") : json(503, #"{"error":"temporarily_unavailable"}"#)
        default:
            return json(404, "{}")
        }
    }

    private func authenticated(_ request: URLRequest) -> Bool {
        let credentials = Data("\(Self.clientID):\(Self.clientSecret)".utf8).base64EncodedString()
        return request.value(forHTTPHeaderField: "Authorization") == "Basic \(credentials)"
    }

    private func token(_ form: FormFields) async -> UpstreamResponse {
        switch form["grant_type"] {
        case "authorization_code":
            let code = state.withLock { $0.codes.removeValue(forKey: form["code"] ?? "") }
            guard let code, let verifier = form["code_verifier"], PKCE.verify(verifier: verifier, challenge: code.challenge),
                  form["redirect_uri"] == code.redirectURI else {
                return json(400, #"{"error":"invalid_grant"}"#)
            }
            let forged = state.withLock { state in defer { state.nextIDTokenNonce = nil }; return state.nextIDTokenNonce }
            var idToken: String?
            if code.scopes.contains("openid") {
                let now = Int(clock.seconds)
                idToken = try? signer.sign(DevelopmentIDToken(
                    iss: Self.issuer, sub: code.subject, aud: Self.clientID, exp: now + 600, iat: now, authTime: Int(code.signedInAt),
                    nonce: forged ?? code.nonce, name: code.subject, email: "\(code.subject)@example.test", emailVerified: true
                ))
            }
            return issue(Grant(subject: code.subject, scopes: code.scopes), idToken: idToken)
        case "refresh_token":
            let during = state.withLock { state in
                defer { state.duringNextRefresh = nil }
                return state.duringNextRefresh
            }
            await during?()
            let (grant, failure) = state.withLock { state -> (Grant?, (status: Int, body: String)?) in
                state.refreshes += 1
                if let failure = state.nextRefreshError {
                    state.nextRefreshError = nil
                    return (nil, failure)
                }
                return (state.refreshTokens.removeValue(forKey: form["refresh_token"] ?? ""), nil)
            }
            if let failure { return json(failure.status, failure.body) }
            guard let grant else { return json(400, #"{"error":"invalid_grant"}"#) }
            return issue(grant, idToken: nil)
        default:
            return json(400, #"{"error":"unsupported_grant_type"}"#)
        }
    }

    private func issue(_ grant: Grant, idToken: String?) -> UpstreamResponse {
        let access = "at-" + UUID().uuidString
        let refresh = "rt-" + UUID().uuidString
        let (lifetime, type) = state.withLock { state in
            state.accessTokens[access] = grant
            state.refreshTokens[refresh] = grant
            defer { state.nextTokenType = nil }
            return (state.accessTokenLifetime, state.nextTokenType ?? "Bearer")
        }
        let id = idToken.map { #","id_token":"\#($0)""# } ?? ""
        return json(200, #"{"access_token":"\#(access)","token_type":"\#(type)","expires_in":\#(lifetime),"refresh_token":"\#(refresh)","scope":"\#(grant.scopes.joined(separator: " "))"\#(id)}"#)
    }

    private func userinfo(_ request: URLRequest) -> UpstreamResponse {
        let header = request.value(forHTTPHeaderField: "Authorization") ?? ""
        let grant = state.withLock { state -> Grant? in
            if state.nextUserinfoUnauthorized {
                state.nextUserinfoUnauthorized = false
                return nil
            }
            return header.hasPrefix("Bearer ") ? state.accessTokens[String(header.dropFirst(7))] : nil
        }
        guard let grant else { return json(401, #"{"error":"invalid_token"}"#) }
        return json(200, #"{"sub":"\#(grant.subject)","name":"\#(grant.subject)","email":"\#(grant.subject)@example.test"}"#)
    }

    private func json(_ status: Int, _ body: String) -> UpstreamResponse {
        UpstreamResponse(status: status, contentType: "application/json", body: Array(body.utf8))
    }
}

struct ScriptError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}
