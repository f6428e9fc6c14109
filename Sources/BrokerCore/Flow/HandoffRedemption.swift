import BrokerCrypto

/// What redeeming a handoff code finds (``StateStore/redeemHandoff(_:now:)``).
enum HandoffRedemption: Sendable {
    /// No such code (never issued, or swept long after it expired).
    case unknown
    /// Issued, not redeemed before, but past its lifetime. It is marked redeemed all the same.
    case expired
    /// Redeemed before: a replay. Carries the session the first redemption created, when it is
    /// known yet, so that the caller revokes it.
    case replayed(SHA256Digest?)
    /// Redeemed now, for the first time: the code's grant.
    case fresh(Handoff)
}
