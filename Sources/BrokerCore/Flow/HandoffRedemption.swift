import BrokerCrypto

/// What redeeming a handoff code finds (``Handoff/redeem(_:)``).
enum HandoffRedemption: Sendable {
    /// No such code (never issued, or swept long after it expired).
    case unknown
    /// It released nothing and never will: past its lifetime, refused too often, or its user
    /// signed out. The grant it held, if any, was revoked.
    case spent(Handoff.SpentReason)
    /// The request may not have what the code holds (another app or redirect URI, a verifier
    /// that does not match); the code is as it was (a refusal before the limit) or was redeemed
    /// before by its app (a replay without the verifier, which ends nothing).
    case refused(HandoffRefusal)
    /// Redeemed before, and now by a request that could have redeemed it: the code has leaked
    /// with its verifier, and the session it released ends.
    case replayed
    /// Redeemed now: its grant is the new session the attempt named; `signIn` is the sign-in's
    /// id, for the log (``SignInLog``).
    case released(signIn: String?)
    /// Redeemed now: it stands for this session, into which an incremental authorization merged.
    case merged(SHA256Digest)
}
