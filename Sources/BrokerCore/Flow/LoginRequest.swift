/// A validated request to sign in (`GET /authorize`) or to add scopes to a session (`POST
/// /authorize`) or to sign a device in (`/device`): every value checked against the configuration
/// before anything is stored.
struct LoginRequest: Sendable {
    let provider: String
    let app: String
    /// Scopes beyond the provider's configured ones: for incremental authorization, the
    /// session's followed by the requested ones.
    let scopes: [String]
    let loginHint: String?
    let prompt: String?
    let purpose: LoginPurpose
}

extension LoginRequest {
    /// Incremental authorization of `session` with `scopes` more: the session's scopes are asked
    /// for again with the new ones, as the merged grant will have them all.
    static func incremental(
        of session: Session, adding scopes: [String], app: String, back: AppReturn, loginHint: String?, prompt: String?
    ) -> LoginRequest {
        var asked = session.scopes
        for scope in scopes where !asked.contains(scope) { asked.append(scope) }
        return LoginRequest(provider: session.provider, app: app, scopes: asked, loginHint: loginHint, prompt: prompt,
                            purpose: .incremental(back, session: session.id))
    }
}
