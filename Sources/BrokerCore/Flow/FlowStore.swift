import BrokerCrypto
import Synchronization

/// Logins in progress and handoff codes, by the hash of their secret value. Both are single-use
/// and short-lived; expired entries are swept.
///
/// Handoff codes are logged and waited for (the app was given the code). Logins in progress are
/// logged without waiting: a crash can lose one begun in the last milliseconds, whose user then
/// simply signs in again — the redirect to the provider is not held up by an fsync.
final class FlowStore: Sendable {
    /// How long a redeemed code is remembered, to recognise a replay and revoke its session.
    static let replayMemory = 600.0

    private struct Entries {
        var pending: [SHA256Digest: PendingAuthorization] = [:]
        var handoffs: [SHA256Digest: Handoff] = [:]
    }

    private let entries = Mutex(Entries())
    private let log: any ChangeLog

    init(log: any ChangeLog) {
        self.log = log
    }

    func addPending(_ state: SHA256Digest, _ pending: PendingAuthorization) {
        entries.withLock { entries in
            entries.pending[state] = pending
            _ = log.enqueue([.pending(state, pending)])
        }
    }

    /// Takes the login for `state`: it can be taken once, and not after it expired.
    func takePending(_ state: SHA256Digest, now: Double) -> PendingAuthorization? {
        entries.withLock { entries in
            guard let pending = entries.pending.removeValue(forKey: state) else { return nil }
            _ = log.enqueue([.pendingRemoved(state)])
            return pending.expiresAt > now ? pending : nil
        }
    }

    func addHandoff(_ code: SHA256Digest, _ handoff: Handoff) -> DurabilityTicket {
        entries.withLock { entries in
            entries.handoffs[code] = handoff
            return log.enqueue([.handoff(code, handoff)])
        }
    }

    /// Marks `code` redeemed (whatever happens next, it never works again) and says what it was.
    func redeem(_ code: SHA256Digest, now: Double) -> (HandoffRedemption, DurabilityTicket) {
        entries.withLock { entries in
            guard var handoff = entries.handoffs[code] else { return (.unknown, .immediate) }
            if handoff.redeemed {
                if handoff.sessionID == nil {
                    handoff.replayedBeforeBinding = true
                    entries.handoffs[code] = handoff
                }
                return (.replayed(handoff.sessionID), .immediate)
            }
            let redeemed = handoff
            handoff.redeemed = true
            handoff.grant = nil
            entries.handoffs[code] = handoff
            let ticket = log.enqueue([.handoff(code, handoff)])
            return (redeemed.expiresAt > now ? .fresh(redeemed) : .expired, ticket)
        }
    }

    /// Records the session a redeemed code created, for replay detection. `replayed` is true
    /// when the code was replayed while the session was being made: the caller revokes it.
    func bind(_ code: SHA256Digest, to session: SHA256Digest) -> (ticket: DurabilityTicket, replayed: Bool) {
        entries.withLock { entries in
            guard var handoff = entries.handoffs[code] else { return (.immediate, false) }
            handoff.sessionID = session
            entries.handoffs[code] = handoff
            return (log.enqueue([.handoff(code, handoff)]), handoff.replayedBeforeBinding)
        }
    }

    /// Applies a recovered record (no logging).
    func restore(_ record: StateRecord) {
        entries.withLock { entries in
            switch record {
            case .pending(let state, let pending): entries.pending[state] = pending
            case .pendingRemoved(let state): entries.pending[state] = nil
            case .handoff(let code, let handoff): entries.handoffs[code] = handoff
            case .session, .sessionRemoved: break
            }
        }
    }

    /// Drops expired logins and handoff codes (not logged: they are expired after a restart too).
    func sweep(now: Double) {
        entries.withLock { entries in
            entries.pending = entries.pending.filter { $0.value.expiresAt > now }
            entries.handoffs = entries.handoffs.filter { $0.value.expiresAt + Self.replayMemory > now }
        }
    }

    /// Copies of everything, for a snapshot.
    func capture() -> (pending: [SHA256Digest: PendingAuthorization], handoffs: [SHA256Digest: Handoff]) {
        entries.withLock { ($0.pending, $0.handoffs) }
    }
}
