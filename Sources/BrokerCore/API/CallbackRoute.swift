import BrokerCrypto
import Foundation
import HTTPServer
import Logging
import WireValues

/// `GET /callback`: the provider sends the browser back here. The broker's `state` must name a
/// login in progress (else a 400 page, never a redirect); from then on every outcome goes back to
/// the app's redirect URI: a handoff code on success, `error=…` otherwise.
struct CallbackRoute: Sendable {
    let services: BrokerServices

    func register(in router: inout Router) {
        router.add("GET", "/callback") { [self] request throws(HTTPError) in
            try services.admit(request, to: services.loginLimiter, route: "/callback")
            let wantsHTML = request.header("Accept")?.contains("text/html") == true
            let fields: FormFields
            let pending: PendingAuthorization
            do throws(HTTPError) {
                fields = try request.query()
                let state = try fields.required("state")
                guard let found = services.store.takeLogin(OpaqueToken.hash(state), now: services.now()) else {
                    throw .badRequest("This sign-in link is unknown, expired or already used; start again from the app.")
                }
                pending = found
            } catch {
                return .now(wantsHTML ? Self.page(error) : error.response)
            }
            return .deferred { [self] in await complete(fields, pending) }
        }
    }

    private func complete(_ fields: FormFields, _ pending: PendingAuthorization) async -> Response {
        if let error = fields["error"] {
            services.metrics.login(provider: pending.provider, outcome: error == "access_denied" ? "denied" : "failed")
            // The provider's code and text go to the app as they are when they are well-formed
            // (RFC 6749 §4.1.2.1); anything else is reported as the provider's malformed answer.
            guard FormFields.isOAuthErrorText(error) else {
                return redirect(pending, error: "invalid_request", description: "The provider answered with a malformed error.")
            }
            let description = fields["error_description"].flatMap { FormFields.isOAuthErrorText($0, limit: 1024) ? $0 : nil }
            return redirect(pending, error: error, description: description)
        }
        guard let code = fields["code"], !code.isEmpty else {
            return redirect(pending, error: "invalid_request", description: "The provider sent no authorization code.")
        }
        let provider: Provider
        do {
            provider = try await services.providers.resolve(pending.provider)
        } catch {
            return redirect(pending, error: "temporarily_unavailable", description: "The provider is unavailable.")
        }
        // RFC 9207: when the provider names its issuer, it must be the one this login went to.
        if let iss = fields["iss"], let issuer = provider.issuer, iss != issuer {
            return redirect(pending, error: "invalid_request", description: "The response came from another issuer.")
        }
        do throws(CallbackFailure) {
            let grant = try await exchange(code, pending, provider)
            let response = try await finish(grant, pending)
            services.metrics.login(provider: provider.id, outcome: "completed")
            return response
        } catch {
            services.metrics.login(provider: provider.id, outcome: "failed")
            services.logger.warning("login failed", metadata: ["provider": "\(provider.id)", "reason": "\(error.log)"])
            return redirect(pending, error: error.code, description: error.description)
        }
    }

    private struct CallbackFailure: Error {
        let code: String
        let description: String
        let log: String
    }

    /// Exchanges the code, verifies the ID token, and establishes who the user is.
    private func exchange(_ code: String, _ pending: PendingAuthorization, _ provider: Provider) async throws(CallbackFailure) -> Grant {
        let response: TokenResponse
        do {
            response = try await services.calls.exchange(code: code, verifier: pending.verifier, callbackURL: services.callbackURL, provider: provider)
        } catch {
            let code = if case .unavailable = error { "temporarily_unavailable" } else { "server_error" }
            throw CallbackFailure(code: code, description: "The provider did not accept the sign-in.", log: error.httpError.description)
        }
        var claims: IDTokenClaims?
        // An ID token is verified and used when the provider is an OpenID Connect issuer; from a
        // plain OAuth 2.0 provider it is ignored (never trusted unverified).
        if let idToken = response.idToken, let issuer = provider.issuer {
            guard let jwksURI = provider.jwksURI else {
                throw CallbackFailure(code: "server_error", description: "The provider's ID token cannot be verified.", log: "no jwks_uri")
            }
            do {
                claims = try await services.idTokens.verify(idToken, jwksURI: jwksURI, issuer: issuer, clientID: provider.config.clientID, nonce: pending.nonce)
            } catch {
                throw CallbackFailure(code: "server_error", description: "The provider's ID token is invalid.", log: error.description)
            }
        } else if pending.requestedScopes.contains("openid"), provider.issuer != nil {
            throw CallbackFailure(code: "server_error", description: "The provider sent no ID token.", log: "openid requested, no id_token")
        }
        let subject = try await subject(claims, response, provider)
        let now = services.now()
        return Grant(response, provider: provider.id, subject: subject, requestedScopes: pending.requestedScopes,
                     idTokenClaims: claims?.raw.serialized(), at: now)
    }

    /// The user's stable id: the ID token's `sub`, or the profile's mapped subject.
    private func subject(_ claims: IDTokenClaims?, _ response: TokenResponse, _ provider: Provider) async throws(CallbackFailure) -> String {
        if let claims { return claims.subject }
        guard let endpoint = provider.userinfoEndpoint else {
            throw CallbackFailure(code: "server_error", description: "The provider does not say who signed in.", log: "no ID token and no userinfo endpoint")
        }
        let raw: JSONValue
        do {
            raw = try await services.calls.userinfo(accessToken: response.accessToken, endpoint: endpoint, method: provider.config.userinfoMethod, provider: provider.id)
        } catch {
            throw CallbackFailure(code: "server_error", description: "The provider's profile could not be read.", log: error.httpError.description)
        }
        guard let profile = provider.config.profileMapping.profile(from: raw) else {
            throw CallbackFailure(code: "server_error", description: "The provider's profile has no user id.", log: "profile without subject")
        }
        return profile.subject
    }

    /// Stores the grant behind a fresh handoff code (merging it into the session for an
    /// incremental authorization) and sends the browser back to the app.
    private func finish(_ grant: Grant, _ pending: PendingAuthorization) async throws(CallbackFailure) -> Response {
        var handoffGrant: Grant? = grant
        if let sessionID = pending.sessionID {
            guard let current = services.store.session(sessionID, now: services.now()) else {
                throw CallbackFailure(code: "access_denied", description: "The session ended during the sign-in.", log: "session gone before merge")
            }
            guard current.subject == grant.subject else {
                throw CallbackFailure(code: "access_denied", description: "A different account signed in than the session's.", log: "subject mismatch on incremental authorization")
            }
            let merged: Session?
            do {
                merged = try await services.store.updateSession(sessionID) { $0.take(grant, scopes: .add) }
            } catch {
                throw CallbackFailure(code: "server_error", description: "The sign-in could not be saved.", log: error.description)
            }
            guard merged != nil else {
                throw CallbackFailure(code: "access_denied", description: "The session ended during the sign-in.", log: "session gone before merge")
            }
            services.profiles.remove(sessionID) // new scopes may show more of the profile
            handoffGrant = nil
        }
        let code = OpaqueToken.make(prefix: OpaqueToken.handoffPrefix)
        let handoff = Handoff(
            app: pending.app, redirectURI: pending.redirectURI, appChallenge: pending.appChallenge,
            expiresAt: services.now() + services.config.sessions.handoffLifetimeSeconds, grant: handoffGrant, sessionID: pending.sessionID
        )
        do {
            try await services.store.issueHandoff(OpaqueToken.hash(code), handoff)
        } catch {
            throw CallbackFailure(code: "server_error", description: "The sign-in could not be saved.", log: error.description)
        }
        return Self.redirect(to: pending.redirectURI, [("code", code)] + (pending.appState.map { [("state", $0)] } ?? []))
    }

    private func redirect(_ pending: PendingAuthorization, error: String, description: String?) -> Response {
        var parameters = [("error", error)]
        if let description { parameters.append(("error_description", String(description.prefix(200)))) }
        if let state = pending.appState { parameters.append(("state", state)) }
        return Self.redirect(to: pending.redirectURI, parameters)
    }

    private static func redirect(to base: String, _ parameters: [(String, String)]) -> Response {
        .redirect(to: FormFields.url(base, adding: parameters))
    }

    /// The error as a small HTML page, for a person looking at a browser.
    private static func page(_ error: HTTPError) -> Response {
        let text = error.description.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
        let html = """
            <!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sign-in failed</title></head>
            <body><h1>Sign-in failed</h1><p>\(text)</p></body></html>
            """
        // The server adds the security headers (a CSP forbidding scripts and framing among them).
        return Response(status: error.status, headers: [HTTPHeader("Content-Type", "text/html; charset=utf-8")], body: Array(html.utf8))
    }
}
