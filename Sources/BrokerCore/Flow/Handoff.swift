import BrokerCrypto

/// A one-time handoff code's record, between `/callback` and `POST /token`: bound to the app,
/// its redirect URI and its PKCE challenge; short-lived.
struct Handoff: Sendable {
    let app: String
    let redirectURI: String
    let appChallenge: String
    let expiresAt: Double
    /// The grant to turn into a new session, or nil when the grant was merged into an existing
    /// session (incremental authorization).
    /// Dropped once the code is redeemed: only the session it made is remembered after that.
    var grant: Grant?
    /// The session the code stands for: set on redemption for a new session, from the start for
    /// an incremental one. A replayed code revokes it.
    var sessionID: SHA256Digest?
    var redeemed = false
    /// Replayed before its redemption bound a session (memory only): the binding revokes it.
    var replayedBeforeBinding = false
}
