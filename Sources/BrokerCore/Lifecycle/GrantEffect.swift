import BrokerCrypto

/// What a step of a grant's holder (a handoff code's redemption, a device code's poll or
/// decision, an expiry, a sign-out) asks the store to do in the same change that keeps the
/// holder's new value (docs/lifecycle.md). The step is decided on the value, once; both stores
/// carry its effects out alike, and only persist.
enum GrantEffect: Sendable {
    /// Make this session: the grant a code released.
    case makeSession(Session)
    /// End this session (a replayed code's), its tokens queued for revocation.
    case endSession(SHA256Digest, EndReason)
    /// Queue the revocation of a grant its holder let go of without a session.
    case revoke(Grant, held: EndedGrant.Holder, app: String, EndReason)
}

/// A step as the store carried it out: the step's answer, the session it made, and the grants it
/// ended (their revocations queued in the same change), for ``GrantEndings`` to announce.
struct Transition<Answer: Sendable>: Sendable {
    let answer: Answer
    var made: Session? = nil
    var ended: [EndedGrant] = []
}
