/// A validated request to sign in (`GET /authorize`) or to add scopes to a session (`POST
/// /authorize`): every value checked against the configuration before anything is stored.
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
}
