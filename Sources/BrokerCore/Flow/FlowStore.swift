import BrokerCrypto
import Synchronization

/// Logins in progress and handoff codes, by the hash of their secret value. Both are single-use
/// and short-lived; expired entries are dropped as new ones arrive.
final class FlowStore: Sendable {
    /// How long a user has from `/authorize` to the provider's redirect back.
    static let authorizationLifetime = 600.0
    /// How long an app has to redeem a handoff code.
    static let handoffLifetime = 60.0
    /// How long a redeemed code is remembered, to recognise a replay and revoke its session.
    static let replayMemory = 600.0

    private struct Entries {
        var pending: [SHA256Digest: PendingAuthorization] = [:]
        var handoffs: [SHA256Digest: Handoff] = [:]
        var insertsSincePrune = 0
    }

    private let entries = Mutex(Entries())

    func addPending(_ state: SHA256Digest, _ pending: PendingAuthorization, now: Double) {
        entries.withLock { entries in
            entries.pending[state] = pending
            Self.pruneIfDue(&entries, now: now)
        }
    }

    /// Takes the login for `state`: it can be taken once, and not after it expired.
    func takePending(_ state: SHA256Digest, now: Double) -> PendingAuthorization? {
        entries.withLock { entries in
            guard let pending = entries.pending.removeValue(forKey: state), pending.expiresAt > now else { return nil }
            return pending
        }
    }

    func addHandoff(_ code: SHA256Digest, _ handoff: Handoff, now: Double) {
        entries.withLock { entries in
            entries.handoffs[code] = handoff
            Self.pruneIfDue(&entries, now: now)
        }
    }

    /// What redeeming `code` finds.
    enum Redemption {
        case unknown
        case expired
        /// Redeemed before: a replay. Carries the session to revoke.
        case replayed(SHA256Digest?)
        case fresh(Handoff)
    }

    /// Marks `code` redeemed (whatever happens next, it never works again) and says what it was.
    func redeem(_ code: SHA256Digest, now: Double) -> Redemption {
        entries.withLock { entries in
            guard var handoff = entries.handoffs[code] else { return .unknown }
            if handoff.redeemed { return .replayed(handoff.sessionID) }
            handoff.redeemed = true
            entries.handoffs[code] = handoff
            return handoff.expiresAt > now ? .fresh(handoff) : .expired
        }
    }

    /// Records the session a redeemed code created, for replay detection.
    func bind(_ code: SHA256Digest, to session: SHA256Digest) {
        entries.withLock { $0.handoffs[code]?.sessionID = session }
    }

    private static func pruneIfDue(_ entries: inout Entries, now: Double) {
        entries.insertsSincePrune += 1
        guard entries.insertsSincePrune >= 256 else { return }
        entries.insertsSincePrune = 0
        entries.pending = entries.pending.filter { $0.value.expiresAt > now }
        entries.handoffs = entries.handoffs.filter { $0.value.expiresAt + replayMemory > now }
    }
}
