import BrokerCrypto
import WireValues

/// A grant that left the broker (docs/lifecycle.md): what held it, whose it was, why, and the
/// revocation of its tokens waiting in the queue. Never a token: what ``GrantEndings`` announces
/// (an audit event, a webhook, a count) is made of this.
struct EndedGrant: Sendable {
    /// Where the grant was when it ended.
    enum Holder: Sendable, Equatable {
        /// A session, by its id (the hash of its token).
        case session(SHA256Digest)
        /// A handoff code its app had not redeemed.
        case handoffCode
        /// A device code its device had not collected.
        case deviceCode
        /// Nothing: it ended on its way to a holder.
        case none

        /// The holder's name in events.
        var name: String {
            switch self {
            case .session: "session"
            case .handoffCode: "handoff_code"
            case .deviceCode: "device_code"
            case .none: "none"
            }
        }
    }

    let holder: Holder
    let provider: String
    let app: String
    let subject: String
    let reason: EndReason
    /// The id of the revocation queued for its tokens (``QueuedRevocation``).
    let revocation: SHA256Digest

    /// A grant's ending, and the revocation to queue with it.
    static func of(_ grant: Grant, held holder: Holder, app: String, reason: EndReason, at now: Double) -> (EndedGrant, QueuedRevocation) {
        let queued = QueuedRevocation(grant, app: app, reason: reason, at: now)
        return (EndedGrant(holder: holder, provider: grant.provider, app: app, subject: grant.subject, reason: reason, revocation: queued.id), queued)
    }

    /// A session's ending, and the revocation to queue with it.
    static func of(_ session: Session, reason: EndReason, at now: Double) -> (EndedGrant, QueuedRevocation) {
        let queued = QueuedRevocation(provider: session.provider, accessToken: session.accessToken, refreshToken: session.refreshToken,
                                      app: session.app, subject: session.subject, reason: reason,
                                      proofKey: session.providerProofKey, at: now)
        let ended = EndedGrant(holder: .session(session.id), provider: session.provider, app: session.app, subject: session.subject,
                               reason: reason, revocation: queued.id)
        return (ended, queued)
    }

    /// The session it was, when it was one.
    var sessionID: SHA256Digest? {
        if case .session(let id) = holder { id } else { nil }
    }

    /// The fields of its audit event and webhook.
    var fields: [(String, JSONValue)] {
        var fields: [(String, JSONValue)] = [
            ("reason", .string(reason.rawValue)), ("held_by", .string(holder.name)),
            ("provider", .string(provider)), ("app", .string(app)), ("subject", .string(subject)),
        ]
        if let sessionID { fields.append(("session", .string(sessionID.hex))) }
        return fields
    }
}
