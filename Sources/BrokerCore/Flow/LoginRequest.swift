import BrokerCrypto

/// A validated request to sign in (`GET /authorize`) or to add scopes to a session (`POST
/// /authorize`) or to approve a device (`/device`): every value checked against the configuration
/// before anything is stored.
struct LoginRequest: Sendable {
    let provider: String
    let app: String
    /// The app's redirect URI, registered for it.
    let redirectURI: String
    /// The app's own `state`, returned to it untouched.
    let appState: String?
    /// The app's S256 PKCE challenge.
    let challenge: String
    /// Scopes beyond the provider's configured ones.
    let scopes: [String]
    let loginHint: String?
    let prompt: String?
    /// For incremental authorization: the session the new grant merges into.
    let session: Session?
    /// For a device login (RFC 8628): the device code the grant goes to; the app's redirect URI,
    /// state and challenge are then empty.
    var deviceCode: SHA256Digest? = nil
}
