/// Why a grant left the broker (docs/lifecycle.md): a closed set, so that it can label a metric
/// and name an audit event's and a webhook's reason.
enum EndReason: String, Sendable, CaseIterable {
    /// Its app revoked its session (`POST /revoke`, the standard revocation endpoint).
    case revoked
    /// An admin ended its session or its user (`/admin/sessions/end`, `/admin/subjects/end`).
    case admin
    /// The provider signed its user out (OpenID Connect Back-Channel Logout).
    case backChannelLogout = "backchannel_logout"
    /// Its handoff code was redeemed again, by a request that could have redeemed it: the code
    /// leaked with its verifier.
    case replayedCode = "replayed_code"
    /// Its handoff code was refused ``Handoff/refusalLimit`` times: someone else holds it.
    case refusedCode = "code_refused"
    /// The provider refused its refresh token (`invalid_grant`).
    case invalidGrant = "invalid_grant"
    /// Its access token expired and it has no refresh token.
    case noRefreshToken = "no_refresh_token"
    /// Its session outlived its idle or absolute lifetime.
    case expired
    /// Its handoff or device code expired before its app or device used it.
    case codeExpired = "code_expired"
    /// The person refused the account at the device confirmation, or before it.
    case deviceRefused = "device_refused"
    /// A standard token endpoint of another provider's issuer was asked for it.
    case otherIssuer = "other_issuer"
    /// It reached no holder: the device code or session it was for ended while the sign-in ran,
    /// another account signed in than the session's, or a refresh brought it for a session
    /// ended meanwhile.
    case notHeld = "not_held"
}
