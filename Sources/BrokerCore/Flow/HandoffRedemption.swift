import BrokerCrypto

/// What redeeming a handoff code finds (``StateStore/redeemHandoff(_:now:check:)``).
enum HandoffRedemption: Sendable {
    /// No such code (never issued, or swept long after it expired).
    case unknown
    /// Issued, not redeemed before, but past its lifetime. It is marked redeemed all the same.
    case expired
    /// The request may not have what the code holds (another app or redirect URI, a verifier that
    /// does not match): at its first redemption — the code is spent and released nothing — or at
    /// a replay, which then ends nothing.
    case refused(HandoffRefusal)
    /// Redeemed before, and now by a request that could have redeemed it: the code has leaked
    /// with its verifier. Carries the session the first redemption released, when it is known
    /// yet, so that the caller revokes it.
    case replayed(SHA256Digest?)
    /// Redeemed now, for the first time: the code's grant.
    case fresh(Handoff)
}
