import BrokerCrypto
import WireValues

/// The one place where what a provider's token endpoint answered becomes a session's: a new
/// session (`POST /token`), an incremental grant merged at `/callback`, and a refresh
/// (`Refresher`).
extension Grant {
    /// The grant a token answer makes: scopes as the answer names them, else as requested (RFC
    /// 6749 §5.1); the expiry counted from `now`; signed in at `signedInAt` (the provider's time of
    /// it, by the provider's clock), else `now`; bound to `proofKey`, the key of the call's proof,
    /// when the answer says its token is (DPoP).
    init(_ answer: TokenResponse, provider: String, subject: String, requestedScopes: [String], idTokenClaims: [UInt8]?,
         signedInAt: Double? = nil, proofKey: ProofSigningKey? = nil, at now: Double) {
        self.init(
            provider: provider, subject: subject, scopes: answer.scopes ?? requestedScopes,
            accessToken: answer.accessToken, accessTokenExpiresAt: answer.expiresIn.map { now + Double($0) },
            refreshToken: answer.refreshToken, idTokenClaims: idTokenClaims, signedInAt: signedInAt ?? now,
            proofKey: answer.boundToKey ? proofKey : nil
        )
    }
}

extension Session {
    /// A new session of `app` holding `grant`, known by `id` (the hash of its token), its token
    /// bound to the key `keyThumbprint` names (DPoP) when there is one.
    init(id: SHA256Digest, app: String, grant: Grant, keyThumbprint: String? = nil, at now: Double) {
        self.init(
            id: id, provider: grant.provider, app: app, subject: grant.subject, scopes: grant.scopes,
            accessToken: grant.accessToken, accessTokenExpiresAt: grant.accessTokenExpiresAt,
            refreshToken: grant.refreshToken, idTokenClaims: grant.idTokenClaims, createdAt: now, signedInAt: grant.signedInAt, usedAt: now,
            providerSessionID: Self.providerSessionID(in: grant.idTokenClaims), keyThumbprint: keyThumbprint,
            providerProofKey: grant.proofKey
        )
    }

    /// The `sid` claim of ID-token claims (JSON), when they have one.
    static func providerSessionID(in claims: [UInt8]?) -> String? {
        guard let claims, case .string(let sid)? = (try? JSONValue.parse(claims))?["sid"], !sid.isEmpty else { return nil }
        return sid
    }

    /// How a later grant's scopes meet the session's.
    enum ScopeChange: Sendable {
        /// The grant's scopes are the session's now (a refresh).
        case replace
        /// The grant's scopes join the session's (an incremental authorization).
        case add
    }

    /// Takes in a later grant of the same user at the same provider: its access token and expiry,
    /// its refresh token when it has one (a rotated one replaces the old; none keeps it), its
    /// ID-token claims when it has them, and its scopes as `scopes` says.
    mutating func take(_ grant: Grant, scopes change: ScopeChange) {
        accessToken = grant.accessToken
        accessTokenExpiresAt = grant.accessTokenExpiresAt
        providerProofKey = grant.proofKey
        if let refreshToken = grant.refreshToken { self.refreshToken = refreshToken }
        if let claims = grant.idTokenClaims {
            idTokenClaims = claims
            if let sid = Self.providerSessionID(in: claims) { providerSessionID = sid }
        }
        switch change {
        case .replace: scopes = grant.scopes
        case .add: for scope in grant.scopes where !scopes.contains(scope) { scopes.append(scope) }
        }
    }
}

extension Grant {
    /// How a person recognises the account that signed in: the ID token's `email`,
    /// `preferred_username` or `name`, else the provider's user id.
    var accountName: String {
        if let raw = idTokenClaims, let claims = try? JSONValue.parse(raw) {
            for name in ["email", "preferred_username", "name"] {
                if case .string(let text)? = claims[name], !text.isEmpty { return text }
            }
        }
        return subject
    }
}
