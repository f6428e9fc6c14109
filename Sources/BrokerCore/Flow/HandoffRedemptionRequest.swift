import BrokerCrypto

/// An app's redemption of a handoff code (`POST /token`, RFC 6749 §4.1.3 shape).
struct HandoffRedemptionRequest: Sendable {
    let code: String
    /// The PKCE verifier of the challenge the app sent to `/authorize`.
    let verifier: String
    let redirectURI: String
    let app: String
    /// The key the redeeming request proved it holds (DPoP), to bind the new session's token to.
    var keyThumbprint: String? = nil
    /// The provider at whose issuer's token endpoint it comes (nil: the broker's own endpoint).
    var issuer: String? = nil
}

/// The session a grant gives (a redeemed handoff code, a device's poll, a refresh), and the token
/// its client holds for it: a new session's token, handed out this once; the presented one for a
/// refresh; nil when a code completed an incremental authorization of a session the app already
/// holds.
struct RedeemedSession: Sendable {
    let session: Session
    let token: String?
}

/// Why a handoff code was not redeemed.
enum HandoffRefusal: Error, Sendable, Equatable {
    /// Never issued, expired, or swept.
    case unknownCode
    /// Redeemed before, and now by a request that could have redeemed it: the code has leaked
    /// with its verifier, and the session it released has ended.
    case replayed
    /// Issued to another app or redirect URI.
    case wrongClient
    /// The PKCE verifier is not one (RFC 7636 §4.1: 43 to 128 unreserved characters); the code
    /// is left as it was.
    case malformedVerifier
    /// The PKCE verifier does not match the app's challenge.
    case wrongVerifier
    /// The code added scopes to a session bound to a key (DPoP), and the request proved no key,
    /// or another.
    case wrongKey
    /// Redeemed at the token endpoint of another provider's issuer.
    case wrongIssuer
    /// The code added scopes to a session bound to a key (the app's or the provider's), and was
    /// redeemed at a provider's issuer, whose answer would be the session's token.
    case boundSessionAtIssuer
    /// The session an incremental authorization merged into has ended since.
    case sessionGone
    /// Refused ``Handoff/refusalLimit`` times (someone else held it): spent, its grant revoked.
    case refusedTooOften
    /// Its user signed out before it was redeemed: spent, its grant revoked.
    case signedOut
    /// The change could not be made durable; nothing was handed out.
    case unsaved
}
