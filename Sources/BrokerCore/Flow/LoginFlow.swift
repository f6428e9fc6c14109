import BrokerCrypto
import Foundation
import Logging
import WireValues

/// The login flow, in one place: `begin` stores a login and builds the provider's
/// authorization URL (`/authorize`); `takeLogin` and `complete` finish it when the provider sends
/// the browser back (`/callback`): the RFC 9207 issuer check, the code exchange, the ID-token
/// policy, merging an incremental grant, and the handoff code; `redeem` turns the code into a
/// session (`POST /token`, `LoginFlow+Redemption.swift`). It takes and returns domain values;
/// the API layer reads requests and writes answers.
struct LoginFlow: Sendable {
    let settings: SessionSettings
    /// Where providers send the browser back: `<public_url>/callback`.
    let callbackURL: String
    let providers: ProviderDirectory
    let calls: ProviderCalls
    let store: any StateStore
    let idTokens: IDTokenVerifier
    let profiles: ProfileCache
    let endings: GrantEndings
    let metrics: BrokerMetrics
    let logger: Logger
    let now: BrokerClock

    /// Stores the login in progress and returns the provider's authorization URL: the broker's
    /// own `state`, PKCE challenge and (for OpenID Connect) nonce; the provider's configured
    /// scopes, the session's (incremental authorization) and the requested ones. With Pushed
    /// Authorization Requests (RFC 9126) those parameters go to the provider first, and the URL
    /// carries only `client_id` and the `request_uri` it answered. Throws when the provider's
    /// document lacks what its configuration needs, when the login cannot be stored (the store
    /// is out of reach), or when the push fails.
    /// `state` is made here unless the caller needs to know it first (a device login binds its
    /// browser to it).
    func begin(
        _ login: LoginRequest, at provider: Provider, state: String = OpaqueToken.make(prefix: OpaqueToken.statePrefix)
    ) async throws(LoginStartError) -> String {
        guard provider.problems.isEmpty else {
            logger.error("the provider cannot start a login", metadata: [
                "provider": "\(provider.id)", "problems": "\(provider.problems.joined(separator: "; "))",
            ])
            throw .unsuitableProvider
        }
        let verifier = PKCE.makeVerifier()
        let nonce = OpaqueToken.make(prefix: "")
        var scopes = provider.config.scopes
        for scope in login.scopes where !scopes.contains(scope) { scopes.append(scope) }
        let signIn = SignInLog.makeID()
        // The grant's DPoP key, made now: with PAR the pushed request's proof binds the code to it
        // (RFC 9449 §10.1); the code exchange proves it either way.
        let key: ProofSigningKey?
        do {
            key = provider.sendsProofs ? try ProofSigningKey.generate() : nil
        } catch {
            throw .pushRefused(.proof("\(error)"))
        }
        do {
            try await store.beginLogin(OpaqueToken.hash(state), PendingAuthorization(
                provider: provider.id, app: login.app, purpose: login.purpose, verifier: verifier, nonce: nonce,
                requestedScopes: scopes, expiresAt: now() + settings.loginLifetimeSeconds, beganAt: now(), signInID: signIn,
                proofKey: key
            ))
        } catch {
            throw .unsaved(error)
        }
        metrics.login(provider: provider.id, outcome: "started")
        logger.info("sign-in started", metadata: SignInLog.metadata(signIn, [
            "provider": "\(provider.id)", "app": "\(login.app)", "purpose": "\(login.purpose.name)",
        ]))
        var parameters = provider.config.authorizationParameters
        if let prompt = login.prompt { parameters["prompt"] = prompt }
        if let hint = login.loginHint { parameters["login_hint"] = hint }
        let query = [
            ("response_type", "code"),
            ("client_id", provider.config.clientID),
            ("redirect_uri", callbackURL),
            ("scope", scopes.joined(separator: provider.config.scopeSeparator)),
            ("state", state),
            ("code_challenge", PKCE.challenge(for: verifier)),
            ("code_challenge_method", "S256"),
        ] + (scopes.contains("openid") ? [("nonce", nonce)] : []) + parameters.sorted { $0.key < $1.key }
        guard let pushEndpoint = provider.pushedAuthorizationEndpoint else {
            return FormFields.url(provider.authorizationEndpoint.absoluteString, adding: query)
        }
        let requestURI: String
        do {
            requestURI = try await calls.pushAuthorization(query, to: pushEndpoint, provider: provider, key: key)
        } catch {
            metrics.login(provider: provider.id, outcome: "failed")
            logger.warning("pushed authorization request failed", metadata: SignInLog.metadata(signIn, [
                "provider": "\(provider.id)", "reason": "\(error.description)",
            ]))
            throw .pushRefused(error)
        }
        // RFC 9126 §4: the browser carries the client and the pushed request, nothing else.
        return FormFields.url(provider.authorizationEndpoint.absoluteString,
                              adding: [("client_id", provider.config.clientID), ("request_uri", requestURI)])
    }

    /// The login begun under the broker's `state`: once, and not after it expired. Nil means the
    /// browser holds a stale, forged or used link, and is not sent anywhere.
    func takeLogin(state: String) async throws(StateWriteError) -> PendingAuthorization? {
        try await store.takeLogin(OpaqueToken.hash(state), now: now())
    }

    /// Completes the login begun under `state` with what the provider sent back: the grant, then
    /// the step of the login's purpose — a handoff code for an app; for an incremental
    /// authorization, merging into its session first; for a device login, holding the grant on
    /// the device code until its person confirms the account (``DeviceFlow/confirm(_:state:approve:)``).
    /// A grant that lands nowhere is revoked (``GrantEndings/drop(_:app:)``); one that landed
    /// while its user signed out ends with the rest of theirs (``GrantEndings/signedOut(_:)``).
    func complete(_ pending: PendingAuthorization, state: String, with answer: CallbackAnswer) async -> LoginCompletion {
        switch pending.purpose {
        case .app(let back):
            let handedOff = await finish(pending, answer) { grant throws(Failure) in
                let code = try await handOff(.holding(grant), app: pending.app, back: back)
                try await standsAfterSignOuts(grant)
                return code
            }
            return .app(back, AppLoginOutcome(handedOff))
        case .incremental(let back, let session):
            let handedOff = await finish(pending, answer) { grant throws(Failure) in
                let bound = try await merge(grant, into: session, app: pending.app)
                try await standsAfterSignOuts(grant)
                // The grant has joined its session here: the sign-in is complete.
                logger.notice("sign-in completed", metadata: SignInLog.metadata(pending.signInID, [
                    "provider": "\(grant.provider)", "app": "\(pending.app)", "session": "\(session.hex)",
                ]))
                return try await handOff(.merged(into: session, boundTo: bound, provider: grant.provider, providerBound: grant.proofKey != nil),
                                         app: pending.app, back: back)
            }
            return .app(back, AppLoginOutcome(handedOff))
        case .device(let code):
            let held = await finish(pending, answer) { grant throws(Failure) in
                try await hold(grant, for: code, login: OpaqueToken.hash(state), app: pending.app)
                try await standsAfterSignOuts(grant)
                return grant.accountName
            }
            // A user who refuses at the provider refuses the device too (RFC 8628: access_denied).
            if answer.error == "access_denied", (try? await store.decideDeviceCode(code, .deny(login: nil), now: now()))?.answer != nil {
                metrics.deviceCode(outcome: "denied")
            }
            return .device(code, DeviceLoginOutcome(held))
        }
    }

    /// The grant in the provider's answer, then `step` with it. The login is counted either
    /// way, and a failure logged (never a token).
    private func finish<Value>(
        _ pending: PendingAuthorization, _ answer: CallbackAnswer, _ step: (Grant) async throws(Failure) -> Value
    ) async -> Result<Value, LoginRefusal> {
        if let error = answer.error {
            metrics.login(provider: pending.provider, outcome: error == "access_denied" ? "denied" : "failed")
            logger.info("the provider ended the sign-in", metadata: SignInLog.metadata(pending.signInID, [
                "provider": "\(pending.provider)", "error": "\(FormFields.isOAuthErrorText(error) ? error : "malformed")",
            ]))
            // The provider's code and text go to the app as they are when they are well-formed
            // (RFC 6749 §4.1.2.1); anything else is reported as the provider's malformed answer.
            guard FormFields.isOAuthErrorText(error) else {
                return .failure(LoginRefusal(error: "invalid_request", description: "The provider answered with a malformed error."))
            }
            return .failure(LoginRefusal(error: error, description: answer.errorDescription.flatMap { FormFields.isOAuthErrorText($0, limit: 1024) ? $0 : nil }))
        }
        guard let code = answer.code, !code.isEmpty else {
            return .failure(LoginRefusal(error: "invalid_request", description: "The provider sent no authorization code."))
        }
        guard let provider = try? await providers.resolve(pending.provider) else {
            return .failure(LoginRefusal(error: "temporarily_unavailable", description: "The provider is unavailable."))
        }
        // RFC 9207 §2.4: when the provider names its issuer, it must be the one this login went
        // to; a provider that says it always names it (§3) and did not is refused too.
        if let issuer = provider.issuer {
            let refusal: String? = if let iss = answer.issuer {
                iss == issuer ? nil : "The response came from another issuer."
            } else {
                provider.issuerInAuthorizationResponse ? "The provider's response did not name its issuer." : nil
            }
            if let refusal {
                metrics.login(provider: provider.id, outcome: "failed")
                logger.warning("login failed", metadata: SignInLog.metadata(pending.signInID, ["provider": "\(provider.id)", "reason": "\(refusal)"]))
                return .failure(LoginRefusal(error: "invalid_request", description: refusal))
            }
        }
        do throws(Failure) {
            let value = try await step(try await exchange(code, pending, provider))
            metrics.login(provider: provider.id, outcome: "completed")
            logger.info("signed in at the provider", metadata: SignInLog.metadata(pending.signInID, ["provider": "\(provider.id)"]))
            return .success(value)
        } catch {
            metrics.login(provider: provider.id, outcome: "failed")
            logger.warning("login failed", metadata: SignInLog.metadata(pending.signInID, ["provider": "\(provider.id)", "reason": "\(error.log)"]))
            return .failure(LoginRefusal(error: error.code, description: error.description))
        }
    }

    /// A failed completion: what the app is told, and what the log says (never a token).
    private struct Failure: Error {
        let code: String
        let description: String
        let log: String
    }

    /// Exchanges the code, verifies the ID token, and establishes who the user is. Tokens the
    /// provider issued for a sign-in that then fails (tokens the broker cannot use, its ID token
    /// refused, its profile not read, a bearer token where `dpop: required`) reach no one: they
    /// are revoked (``GrantEndings/drop``).
    private func exchange(_ code: String, _ pending: PendingAuthorization, _ provider: Provider) async throws(Failure) -> Grant {
        let response: TokenResponse
        do {
            response = try await calls.exchange(code: code, verifier: pending.verifier, callbackURL: callbackURL, provider: provider,
                                                key: pending.proofKey)
        } catch {
            if case .unusableTokens(_, let tokens) = error { await drop(tokens, of: pending, at: provider, proofKey: nil) }
            let code = if case .unavailable = error { "temporarily_unavailable" } else { "server_error" }
            throw Failure(code: code, description: "The provider did not accept the sign-in.", log: error.description)
        }
        let proofKey = response.boundToKey ? pending.proofKey : nil
        let grant: Grant
        do throws(Failure) {
            grant = try await identified(response, pending, provider, key: proofKey)
        } catch {
            await drop(response, of: pending, at: provider, proofKey: proofKey)
            throw error
        }
        // `dpop: required`: a token the provider did not bind is never held, and is revoked.
        if provider.config.dpop == .required, !response.boundToKey {
            await endings.drop(grant, app: pending.app)
            throw Failure(code: "server_error", description: "The provider did not bind its token to the broker's key (DPoP).",
                          log: "dpop is required, and the provider answered a bearer token")
        }
        return grant
    }

    /// Revokes the tokens a failed sign-in got (``GrantEndings/drop``). Who signed in is not known,
    /// or not trusted: the ending names no subject.
    private func drop(_ tokens: TokenResponse, of pending: PendingAuthorization, at provider: Provider, proofKey: ProofSigningKey?) async {
        var unclaimed = Grant(tokens, provider: provider.id, subject: "", requestedScopes: pending.requestedScopes, idTokenClaims: nil,
                              signedInAt: now(), proofKey: proofKey, at: now())
        unclaimed.signInID = pending.signInID
        await endings.drop(unclaimed, app: pending.app)
    }

    /// The grant in the provider's token response, once its ID token is verified and its user known.
    private func identified(_ response: TokenResponse, _ pending: PendingAuthorization, _ provider: Provider, key proofKey: ProofSigningKey?)
        async throws(Failure) -> Grant {
        var claims: IDTokenClaims?
        // An ID token is verified and used when the provider is an OpenID Connect issuer; from a
        // plain OAuth 2.0 provider it is ignored (never trusted unverified).
        if let idToken = response.idToken, let issuer = provider.issuer {
            guard let jwksURI = provider.jwksURI else {
                throw Failure(code: "server_error", description: "The provider's ID token cannot be verified.", log: "no jwks_uri")
            }
            do {
                claims = try await idTokens.verify(idToken, jwksURI: jwksURI, issuer: issuer, clientID: provider.config.clientID, nonce: pending.nonce)
            } catch {
                throw Failure(code: "server_error", description: "The provider's ID token is invalid.", log: error.description)
            }
        } else if pending.requestedScopes.contains("openid"), provider.issuer != nil {
            throw Failure(code: "server_error", description: "The provider sent no ID token.", log: "openid requested, no id_token")
        }
        let subject = try await subject(claims, response, provider, key: proofKey)
        // When this sign-in happened, which a sign-out's time is compared with: the user's
        // authentication at the provider, but not before this login began (a provider that reuses
        // its own session sends the time of that session's first sign-in).
        let authenticated = (claims?.authTime ?? claims?.issuedAt)?.timeIntervalSince1970 ?? now()
        let signedInAt = max(authenticated, pending.beganAt)
        var grant = Grant(response, provider: provider.id, subject: subject, requestedScopes: pending.requestedScopes,
                          idTokenClaims: claims?.kept, signedInAt: signedInAt, proofKey: proofKey, at: now())
        grant.signInID = pending.signInID
        return grant
    }

    /// The user's stable id: the ID token's `sub`, or the profile's mapped subject.
    private func subject(_ claims: IDTokenClaims?, _ response: TokenResponse, _ provider: Provider, key: ProofSigningKey?)
        async throws(Failure) -> String {
        if let claims { return claims.subject }
        guard let endpoint = provider.userinfoEndpoint else {
            throw Failure(code: "server_error", description: "The provider does not say who signed in.", log: "no ID token and no userinfo endpoint")
        }
        let raw: JSONValue
        do {
            raw = try await calls.userinfo(accessToken: response.accessToken, endpoint: endpoint, method: provider.config.userinfoMethod,
                                           provider: provider.id, key: key)
        } catch {
            throw Failure(code: "server_error", description: "The provider's profile could not be read.", log: error.description)
        }
        guard let profile = provider.config.profileMapping.profile(from: raw) else {
            throw Failure(code: "server_error", description: "The provider's profile has no user id.", log: "profile without subject")
        }
        return profile.subject
    }

    /// Holds the grant on the device code until its person confirms the account, durably: they
    /// are about to be asked. A code that expired or was refused meanwhile gets nothing, and the
    /// grant is revoked at the provider.
    private func hold(_ grant: Grant, for device: SHA256Digest, login: SHA256Digest, app: String) async throws(Failure) {
        let held: DeviceAuthorization.Status?
        do {
            held = try await store.decideDeviceCode(device, .signedIn(grant, login: login), now: now()).answer
        } catch {
            await endings.drop(grant, app: app)
            throw Failure(code: "temporarily_unavailable", description: "The sign-in could not be saved; enter the code again in a moment.", log: error.description)
        }
        guard held != nil else {
            await endings.drop(grant, app: app)
            throw Failure(code: "expired_token", description: "The device's code expired or was refused while you signed in; start again on the device.",
                          log: "device code no longer pending")
        }
        metrics.deviceCode(outcome: "signed_in")
    }

    /// Merges an incremental authorization's grant into its session: the same user only, and
    /// only while the session lasts; otherwise the grant is revoked. Returns the key the
    /// session's token is bound to (DPoP), which its code will ask a proof of.
    private func merge(_ grant: Grant, into sessionID: SHA256Digest, app: String) async throws(Failure) -> String? {
        do throws(Failure) {
            let gone = Failure(code: "access_denied", description: "The session ended during the sign-in.", log: "session gone before merge")
            let found: Session?
            do {
                found = try await store.findSession(sessionID, now: now())
            } catch {
                throw Failure(code: "temporarily_unavailable", description: "The sign-in could not be saved; sign in again in a moment.", log: error.description)
            }
            guard let current = found else { throw gone }
            guard current.subject == grant.subject else {
                throw Failure(code: "access_denied", description: "A different account signed in than the session's.", log: "subject mismatch on incremental authorization")
            }
            let merged: Session?
            do {
                merged = try await store.updateSession(sessionID, under: nil) { $0.take(grant, scopes: .add) }
            } catch {
                throw Failure(code: "temporarily_unavailable", description: "The sign-in could not be saved; sign in again in a moment.", log: error.description)
            }
            guard let merged else { throw gone }
            profiles.remove(sessionID) // new scopes may show more of the profile
            return merged.keyThumbprint
        } catch {
            await endings.drop(grant, app: app)
            throw error
        }
    }

    /// Stores a fresh handoff code, durably, and returns it: holding a new session's grant
    /// (revoked when it cannot be stored), or standing for the session an incremental
    /// authorization merged into.
    private func handOff(_ status: Handoff.Status, app: String, back: AppReturn) async throws(Failure) -> String {
        let code = OpaqueToken.make(prefix: OpaqueToken.handoffPrefix)
        let handoff = Handoff(app: app, redirectURI: back.redirectURI, appChallenge: back.challenge,
                              expiresAt: now() + settings.handoffLifetimeSeconds, status: status)
        do {
            try await store.issueHandoff(OpaqueToken.hash(code), handoff)
        } catch {
            if let grant = handoff.heldGrant { await endings.drop(grant, app: app) }
            throw Failure(code: "temporarily_unavailable", description: "The sign-in could not be saved; sign in again in a moment.", log: error.description)
        }
        return code
    }

    /// Whether `grant`, just landed behind a code or in a session, stands: when its user signed
    /// out while the sign-in was under way, it has ended with the rest of theirs, and the sign-in
    /// fails. A store out of reach fails it too (the grant stays where it landed, for the sign-out
    /// to find or its expiry to revoke).
    private func standsAfterSignOuts(_ grant: Grant) async throws(Failure) {
        let signedOut: SignOut?
        do {
            signedOut = try await endings.signedOut(grant)
        } catch {
            throw Failure(code: "temporarily_unavailable", description: "The sign-in could not be saved; sign in again in a moment.", log: "\(error)")
        }
        guard signedOut != nil else { return }
        throw Failure(code: "access_denied", description: "You were signed out while signing in; sign in again.", log: "signed out during the sign-in")
    }
}
