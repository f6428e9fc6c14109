import BrokerCrypto

/// One user's grant at one provider, held for one app. The session token itself is never
/// stored: the session is found by the token's SHA-256 hash (`id`).
struct Session: Sendable {
    let id: SHA256Digest
    let provider: String
    let app: String
    var subject: String
    /// Granted scopes.
    var scopes: [String]
    var accessToken: String
    /// Unix seconds; nil when the provider gave no lifetime.
    var accessTokenExpiresAt: Double?
    var refreshToken: String?
    /// The verified ID token's claims as JSON, when the provider sent one (kept serialised:
    /// compact, and parsed only when `/profile` needs them).
    var idTokenClaims: [UInt8]?
    let createdAt: Double
    /// When its user signed in at the provider (``Grant/signedInAt``; `createdAt` for sessions
    /// made before it was kept): what a sign-out's time is compared with.
    let signedInAt: Double
    /// When a request was last admitted with its token (``StateStore/noteUse(_:now:)``), to the
    /// ``useMarkInterval``: a mark is refreshed at most that often.
    var usedAt: Double
    static let useMarkInterval: Double = 60
    /// When the broker last refreshed the token at the provider; nil before the first refresh.
    /// Kept with the session, so that the bound on refreshes holds across broker instances.
    var refreshedAt: Double? = nil
    /// The provider's session at sign-in: the ID token's `sid` (OpenID Connect Front- and
    /// Back-Channel Logout), by which a logout token names the sessions to end; nil without one.
    var providerSessionID: String? = nil
    /// The JWK thumbprint (RFC 7638) of the key its token is bound to (DPoP, RFC 9449): fixed
    /// when the session is made, by the proof its app sent to redeem the code; nil for a bearer
    /// session.
    var keyThumbprint: String? = nil
    /// The broker's key the provider's access token is bound to (DPoP towards the provider,
    /// ``Grant/proofKey``): every call with the token carries a proof of it; nil for a bearer token.
    var providerProofKey: ProofSigningKey? = nil

    /// Whether the access token is good for at least `seconds` more at `now`.
    func accessTokenValid(for seconds: Double, at now: Double) -> Bool {
        guard let expiresAt = accessTokenExpiresAt else { return true }
        return expiresAt - now > seconds
    }

    /// Seconds the access token has left, for `expires_in`; nil when unknown.
    func expiresIn(at now: Double) -> Int? {
        accessTokenExpiresAt.map { max(0, Int(($0 - now).rounded(.down))) }
    }
}
