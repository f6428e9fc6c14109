import BrokerCrypto

/// What the provider granted, from the code exchange at `/callback` on: held behind a handoff
/// code or a device code until it becomes a session, and merged into a session by an
/// incremental authorization (docs/lifecycle.md).
struct Grant: Sendable {
    let provider: String
    let subject: String
    let scopes: [String]
    let accessToken: String
    let accessTokenExpiresAt: Double?
    let refreshToken: String?
    /// The verified ID token's claims as JSON.
    let idTokenClaims: [UInt8]?
    /// When its user signed in (Unix seconds): the ID token's `auth_time`, else its `iat` — by the
    /// provider's clock, as its logout tokens are dated — else the broker's time of the code
    /// exchange; never before its login began at the broker. A sign-out (a back-channel logout,
    /// an admin's end of the user) ends the grants signed in before its time, wherever they are held.
    let signedInAt: Double
    /// The id in the log of the sign-in it came from (``SignInLog``); nil for a refresh's.
    var signInID: String? = nil
    /// The key its access token is bound to (DPoP, RFC 9449), which every call with it proves;
    /// nil for a bearer token.
    var proofKey: ProofSigningKey? = nil
}

extension Grant {
    /// The provider's session it was signed in with: the ID token's `sid`, when it has one.
    var providerSessionID: String? { Session.providerSessionID(in: idTokenClaims) }
}
