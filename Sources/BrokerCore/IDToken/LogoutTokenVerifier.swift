import Foundation
import WireValues

/// Verifies OpenID Connect Back-Channel Logout 1.0 logout tokens (§2.4, §2.6) against a
/// provider's published keys: the signature as an ID token's (``IDTokenVerifier``: the
/// algorithm allowlist, the `kid` in the provider's key set), then `iss` exactly the provider's
/// issuer, `aud` containing the broker's client id, `iat` within ``maximumAge`` (and not in the
/// future), `exp` not passed when present, a `jti`, the `events` claim with the back-channel
/// logout event as an object, `sub` or `sid` or both, and no `nonce` (so that an ID token is
/// never taken for a logout token); a `typ` header, when present, `logout+jwt` or `JWT` (§4.1). That a `jti` is accepted once is the caller's to enforce
/// (``BackChannelLogout``), in the store, across instances.
struct LogoutTokenVerifier: Sendable {
    /// The event a logout token carries in `events`.
    static let event = "http://schemas.openid.net/event/backchannel-logout"
    /// How old a logout token may be (its `iat`), beyond the clock skew: its `jti` is remembered
    /// that long, so an older replay is refused by age.
    static let maximumAge = 300.0

    let signatures: IDTokenVerifier
    let clockSkew: Double
    let clock: BrokerClock

    init(signatures: IDTokenVerifier, clockSkew: Double = 60, clock: @escaping BrokerClock) {
        self.signatures = signatures
        self.clockSkew = clockSkew
        self.clock = clock
    }

    /// What a valid logout token says.
    struct Logout: Sendable, Equatable {
        let issuer: String
        let tokenID: String
        let subject: String?
        let providerSessionID: String?
        /// What a grant it ends was signed in before (Unix seconds, ``Grant/signedInAt``, which
        /// the provider's ID token dates by the provider's clock, as it dates this): the end of
        /// its `iat`'s second. One signed in later is a sign-in after the logout.
        let signedInBefore: Double
        /// Until when its `jti` must be remembered (Unix seconds).
        let rememberUntil: Double
    }

    func verify(_ token: String, jwksURI: URL, issuer: String, clientID: String) async throws(LogoutTokenError) -> Logout {
        // §4.1 (cross-JWT confusion): a token that says it is of another kind (an access token,
        // a security event of another profile) is not taken for a logout token.
        guard let header = try? CompactJWSHeader(of: token) else { throw .malformed }
        if let type = header.type?.lowercased(), !["jwt", "logout+jwt", "application/logout+jwt"].contains(type) { throw .wrongType }
        let claims: JSONValue
        do throws(IDTokenError) {
            claims = try await signatures.verifiedPayload(token, jwksURI: jwksURI)
        } catch {
            throw LogoutTokenError(error)
        }
        return try check(claims, issuer: issuer, clientID: clientID)
    }

    private func check(_ claims: JSONValue, issuer: String, clientID: String) throws(LogoutTokenError) -> Logout {
        guard case .object = claims else { throw .malformed }
        let read = { (name: String) throws(LogoutTokenError) -> String? in
            do { return try claims.optionalString(name) } catch { throw .malformed }
        }
        guard try read("iss") == issuer else { throw .wrongIssuer }
        let audience: [String]?
        let issuedAt: Date?
        let expiresAt: Date?
        do {
            audience = try claims.audience()
            issuedAt = try claims.optionalDate("iat")
            expiresAt = try claims.optionalDate("exp")
        } catch {
            throw .malformed
        }
        guard audience?.contains(clientID) == true else { throw .wrongAudience }
        guard let issuedAt = issuedAt?.timeIntervalSince1970 else { throw .missingIssueTime }
        let now = clock()
        guard issuedAt <= now + clockSkew else { throw .issuedInTheFuture }
        guard now - issuedAt <= Self.maximumAge + clockSkew else { throw .tooOld }
        if let expiresAt, expiresAt.timeIntervalSince1970 + clockSkew < now { throw .expired }
        guard let tokenID = try read("jti"), !tokenID.isEmpty else { throw .missingTokenID }
        guard case .object(let events)? = claims["events"],
              let event = events.first(where: { $0.0 == Self.event })?.1, case .object = event else { throw .notALogoutEvent }
        let subject = try read("sub").flatMap { $0.isEmpty ? nil : $0 }
        let session = try read("sid").flatMap { $0.isEmpty ? nil : $0 }
        guard subject != nil || session != nil else { throw .noSubjectOrSession }
        // §2.4: "A nonce Claim MUST NOT be present" — not even as null.
        if claims["nonce"] != nil { throw .nonceForbidden }
        return Logout(issuer: issuer, tokenID: tokenID, subject: subject, providerSessionID: session,
                      signedInBefore: issuedAt + 1, rememberUntil: issuedAt + Self.maximumAge + 2 * clockSkew)
    }
}

/// Why a logout token was refused: one short sentence, never the token or a claim's value.
struct LogoutTokenError: Error, Sendable, Equatable, CustomStringConvertible {
    let description: String
    /// The provider's key set could not be had: not the token's fault (503, where the rest is 400).
    let keySetUnavailable: Bool

    private init(_ description: String, keySetUnavailable: Bool = false) {
        self.description = description
        self.keySetUnavailable = keySetUnavailable
    }

    /// The signature step's refusal, worded for a logout token.
    init(_ error: IDTokenError) {
        switch error {
        case .malformed: self = .malformed
        case .unknownKey: self.init("no key in the provider's key set matches the logout token's key id and algorithm")
        case .badSignature: self.init("the logout token's signature does not verify")
        case let other where other.isKeySetUnavailable: self.init("the provider's key set is unavailable", keySetUnavailable: true)
        default: self.init("the logout token's signing algorithm is not allowed")
        }
    }

    static let malformed = LogoutTokenError("the logout token is not a well-formed signed JWT")
    static let wrongIssuer = LogoutTokenError("the logout token was issued by another issuer")
    static let wrongAudience = LogoutTokenError("the logout token is not meant for this client")
    static let missingIssueTime = LogoutTokenError("the logout token has no issue time (iat)")
    static let issuedInTheFuture = LogoutTokenError("the logout token's issue time is in the future")
    static let tooOld = LogoutTokenError("the logout token is too old")
    static let expired = LogoutTokenError("the logout token has expired")
    static let missingTokenID = LogoutTokenError("the logout token has no jti")
    static let notALogoutEvent = LogoutTokenError("the logout token's events claim has no back-channel logout event")
    static let noSubjectOrSession = LogoutTokenError("the logout token names neither a subject (sub) nor a session (sid)")
    static let nonceForbidden = LogoutTokenError("a logout token must not carry a nonce")
    static let wrongType = LogoutTokenError("the logout token's typ header names another kind of token")
    static let replayed = LogoutTokenError("this logout token was already received")
}
