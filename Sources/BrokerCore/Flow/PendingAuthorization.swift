import BrokerCrypto

/// A login in progress, between `/authorize` and `/callback`, found by the hash of the broker's
/// own `state` value. Single use; expires after `sessions.login_lifetime_seconds`.
struct PendingAuthorization: Sendable {
    let provider: String
    let app: String
    /// The app's redirect URI exactly as it sent it.
    let redirectURI: String
    /// The app's own `state`, returned to it untouched.
    let appState: String?
    /// The app's S256 PKCE challenge, checked at `POST /token`.
    let appChallenge: String
    /// The broker's PKCE verifier for the provider leg.
    let verifier: String
    /// The OIDC nonce the ID token must carry.
    let nonce: String
    let requestedScopes: [String]
    /// For incremental authorization: the session the new grant merges into.
    let sessionID: SHA256Digest?
    let expiresAt: Double
    /// For a device login (RFC 8628): the device code the grant goes to, instead of an app's
    /// redirect URI (then empty, as are `appState` and `appChallenge`).
    var deviceCode: SHA256Digest? = nil
}

/// What the provider granted, kept between `/callback` and `POST /token`.
struct Grant: Sendable {
    let provider: String
    let subject: String
    let scopes: [String]
    let accessToken: String
    let accessTokenExpiresAt: Double?
    let refreshToken: String?
    /// The verified ID token's claims as JSON.
    let idTokenClaims: [UInt8]?
}
