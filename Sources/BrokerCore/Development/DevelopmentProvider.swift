import BrokerCrypto
import Foundation
import HTTPServer
import WireValues

/// The built-in development identity provider, served under `/dev` by the broker itself: an
/// OpenID Connect provider with discovery, a sign-in page that accepts any name, PKCE, rotating
/// refresh tokens, userinfo, revocation and ES256 ID tokens.
struct DevelopmentProvider: Sendable {
    let issuer: String
    let callbackURL: String
    let clientSecret: String
    let signer: DevelopmentSigner
    let grants = DevelopmentGrants()
    let now: @Sendable () -> Double
    static let accessTokenLifetime = 3600.0

    func register(in routes: inout RouteTable) {
        routes.add("GET", "/dev/.well-known/openid-configuration", DevelopmentMode.policy(body: .none)) { [issuer] _ in
            .now(.json(.object([
                ("issuer", .string(issuer)),
                ("authorization_endpoint", .string(issuer + "/authorize")),
                ("token_endpoint", .string(issuer + "/token")),
                ("userinfo_endpoint", .string(issuer + "/userinfo")),
                ("revocation_endpoint", .string(issuer + "/revoke")),
                ("jwks_uri", .string(issuer + "/jwks")),
                ("response_types_supported", .array([.string("code")])),
                ("subject_types_supported", .array([.string("public")])),
                ("id_token_signing_alg_values_supported", .array([.string("ES256")])),
                ("code_challenge_methods_supported", .array([.string("S256")])),
            ])))
        }
        routes.add("GET", "/dev/jwks", DevelopmentMode.policy(body: .none)) { [signer] _ in
            .now(Response.json(serialized: Array(signer.jwks.utf8)))
        }
        routes.add("GET", "/dev/authorize", DevelopmentMode.policy(body: .none)) { [self] request throws(HTTPError) in
            let query = try request.query()
            _ = try validateAuthorization(query)
            return .now(DevelopmentPages.signIn(query: String(request.rawQuery ?? "")))
        }
        routes.add("POST", "/dev/authorize", DevelopmentMode.policy(body: .form)) { [self] request throws(HTTPError) in
            .now(try decide(query: try request.query(), form: try request.form()))
        }
        routes.add("POST", "/dev/token", DevelopmentMode.policy(body: .form)) { [self] request throws(HTTPError) in
            let form = try request.form()
            try authenticateClient(request, form)
            return .deferredCatching { [self] () async throws(HTTPError) -> Response in try await token(form) }
        }
        routes.add("GET", "/dev/userinfo", DevelopmentMode.policy(body: .none)) { [self] request throws(HTTPError) in .now(try userinfo(request)) }
        routes.add("POST", "/dev/revoke", DevelopmentMode.policy(body: .form)) { [self] request throws(HTTPError) in
            let form = try request.form()
            try authenticateClient(request, form)
            grants.revoke(try form.required("token"))
            return .now(Response(status: 200))
        }
    }

    /// Checks an authorization request; errors are shown, never redirected.
    private func validateAuthorization(_ query: FormFields) throws(HTTPError) -> (redirect: String, challenge: String) {
        guard query["client_id"] == DevelopmentMode.clientID else { throw .badRequest("Unknown client_id.") }
        guard query["response_type"] == "code" else { throw .badRequest("response_type must be code.") }
        let redirect = try query.required("redirect_uri")
        guard redirect == callbackURL else { throw .badRequest("redirect_uri is not the broker's callback.") }
        let challenge = try query.required("code_challenge")
        guard query["code_challenge_method"] == "S256", PKCE.isWellFormed(challenge) else {
            throw .badRequest("PKCE with S256 is required.")
        }
        return (redirect, challenge)
    }

    /// The sign-in form's answer: back to the broker with a code, or with `access_denied`.
    private func decide(query: FormFields, form: FormFields) throws(HTTPError) -> Response {
        let (redirect, challenge) = try validateAuthorization(query)
        var parameters: [(String, String)] = []
        if form["decision"] == "deny" {
            parameters.append(("error", "access_denied"))
        } else {
            let user = try Self.validUser(try form.required("user"))
            let code = "dev_code_" + Base64URL.encode(SecureRandom.bytes(count: 24))
            grants.addCode(code, .init(
                user: user.lowercased(), scopes: (query["scope"] ?? "").split(separator: " ").map(String.init),
                challenge: challenge, nonce: query["nonce"], signedInAt: now(), expiresAt: now() + 60
            ))
            parameters.append(("code", code))
        }
        if let state = query["state"] { parameters.append(("state", state)) }
        parameters.append(("iss", issuer))
        return .redirect(to: redirect + "?" + FormFields.encode(parameters))
    }

    private func authenticateClient(_ request: Request, _ form: FormFields) throws(HTTPError) {
        let expected = "Basic " + Data("\(DevelopmentMode.clientID):\(FormFields.escape(clientSecret))".utf8).base64EncodedString()
        let basic = request.header("Authorization").map { constantTimeEquals($0, expected) } ?? false
        let posted = form["client_id"] == DevelopmentMode.clientID && form["client_secret"].map { constantTimeEquals($0, clientSecret) } == true
        guard basic || posted else {
            throw HTTPError(status: 401, code: "invalid_client", description: "Client authentication failed.")
        }
    }

    private func token(_ form: FormFields) async throws(HTTPError) -> Response {
        let now = now()
        switch form["grant_type"] {
        case "authorization_code":
            guard let code = form["code"], let authorization = grants.takeCode(code, now: now),
                  form["redirect_uri"] == callbackURL,
                  PKCE.verify(verifier: form["code_verifier"] ?? "", challenge: authorization.challenge)
            else { throw .badRequest("The code is invalid, expired or used, or PKCE failed.", code: "invalid_grant") }
            let tokens = grants.issue(user: authorization.user, scopes: authorization.scopes, now: now, lifetime: Self.accessTokenLifetime)
            var fields = tokenFields(tokens, scopes: authorization.scopes)
            if authorization.scopes.contains("openid") {
                let claims = DevelopmentIDToken(
                    iss: issuer, sub: Self.subject(authorization.user), aud: DevelopmentMode.clientID,
                    exp: Int(now) + 600, iat: Int(now), authTime: Int(authorization.signedInAt), nonce: authorization.nonce,
                    name: authorization.user, email: "\(authorization.user)@example.test", emailVerified: true
                )
                guard let idToken = try? signer.sign(claims) else {
                    throw HTTPError(status: 500, code: "server_error", description: "The ID token could not be signed.")
                }
                fields.append(("id_token", .string(idToken)))
            }
            return .json(.object(fields))
        case "refresh_token":
            guard let token = form["refresh_token"], let holder = grants.spendRefreshToken(token) else {
                throw .badRequest("The refresh token is invalid or was already used.", code: "invalid_grant")
            }
            let tokens = grants.issue(user: holder.user, scopes: holder.scopes, now: now, lifetime: Self.accessTokenLifetime)
            return .json(.object(tokenFields(tokens, scopes: holder.scopes)))
        default:
            throw .badRequest("grant_type must be authorization_code or refresh_token.", code: "unsupported_grant_type")
        }
    }

    private func tokenFields(_ tokens: (access: String, refresh: String), scopes: [String]) -> [(String, JSONValue)] {
        [
            ("access_token", .string(tokens.access)),
            ("token_type", .string("Bearer")),
            ("expires_in", .int(Int(Self.accessTokenLifetime))),
            ("refresh_token", .string(tokens.refresh)),
            ("scope", .string(scopes.joined(separator: " "))),
        ]
    }

    private func userinfo(_ request: Request) throws(HTTPError) -> Response {
        let header = request.header("Authorization") ?? ""
        guard header.hasPrefix("Bearer "), let holder = grants.accessHolder(String(header.dropFirst(7)), now: now()) else {
            throw .invalidToken("The access token is invalid or expired.")
        }
        return .json(.object([
            ("sub", .string(Self.subject(holder.user))),
            ("name", .string(holder.user)),
            ("preferred_username", .string(holder.user)),
            ("email", .string("\(holder.user)@example.test")),
            ("email_verified", .bool(true)),
        ]))
    }

    /// The provider's user id of a name, as its ID tokens and logout tokens give it.
    static func subject(_ user: String) -> String { "dev-" + user.lowercased() }

    /// A name typed at the sign-in or sign-out page.
    static func validUser(_ user: String) throws(HTTPError) -> String {
        guard (1...64).contains(user.utf8.count), user.allSatisfy({ $0.isLetter || $0.isNumber || "._-".contains($0) }) else {
            throw .badRequest("user must be 1 to 64 letters, digits, dots, dashes or underscores.")
        }
        return user
    }
}
