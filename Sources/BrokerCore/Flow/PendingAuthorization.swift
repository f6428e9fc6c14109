import BrokerCrypto

/// A login in progress, between `/authorize` and `/callback`, found by the hash of the broker's
/// own `state` value. Single use; expires after `sessions.login_lifetime_seconds`.
struct PendingAuthorization: Sendable {
    let provider: String
    let app: String
    let purpose: LoginPurpose
    /// The broker's PKCE verifier for the provider leg.
    let verifier: String
    /// The OIDC nonce the ID token must carry.
    let nonce: String
    let requestedScopes: [String]
    let expiresAt: Double
    /// When it began (`/authorize`), by the broker's clock: a sign-in under way when its user was
    /// signed out began before the sign-out (``Grant/signedInAt``).
    let beganAt: Double
    /// The sign-in's id in the log, from `/authorize` to the session (``SignInLog``); nil in a
    /// login begun by a broker from before it.
    var signInID: String? = nil
    /// The key of the grant to come, when its provider binds tokens (DPoP): the pushed request's
    /// proof and the code exchange's are made with it.
    var proofKey: ProofSigningKey? = nil
}
