import BrokerCrypto
import Synchronization

/// The embedded store's (``EmbeddedStateStore``) logins in progress, handoff codes and device
/// codes, by the hash of their secret value, and tokens accepted once (back-channel logout
/// tokens). All are single-use and short-lived; expired entries are swept.
///
/// Handoff codes are logged and waited for (the app was given the code). Logins in progress are
/// logged without waiting: a crash can lose one begun in the last milliseconds, whose user then
/// simply signs in again — the redirect to the provider is not held up by an fsync.
final class FlowTable: Sendable {
    private struct Entries {
        var pending: [SHA256Digest: PendingAuthorization] = [:]
        var handoffs: [SHA256Digest: Handoff] = [:]
        var devices: [SHA256Digest: DeviceAuthorization] = [:]
        /// Device codes by user code, while their user can act on them.
        var userCodes: [SHA256Digest: SHA256Digest] = [:]
        /// Tokens accepted once, until when they are remembered.
        var spent: [SHA256Digest: Double] = [:]

        mutating func put(_ code: SHA256Digest, _ device: DeviceAuthorization) {
            devices[code] = device
            if case .pending = device.status { userCodes[device.userCode] = code } else { userCodes[device.userCode] = nil }
        }
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

    /// Marks `code` redeemed (whatever happens next, it never works again) and says what it was
    /// (``StateStore/redeemHandoff(_:now:check:)``).
    func redeem(_ code: SHA256Digest, now: Double, check: (Handoff) -> HandoffRefusal?) -> (HandoffRedemption, DurabilityTicket) {
        entries.withLock { entries in
            guard var handoff = entries.handoffs[code] else { return (.unknown, .immediate) }
            if handoff.redeemed {
                if let refusal = check(handoff) { return (.refused(refusal), .immediate) }
                if handoff.sessionID == nil {
                    handoff.replayedBeforeBinding = true
                    entries.handoffs[code] = handoff
                }
                return (.replayed(handoff.sessionID), .immediate)
            }
            let redeemed = handoff
            let live = redeemed.expiresAt > now
            let refusal = live ? check(redeemed) : nil
            handoff.redeemed = true
            handoff.grant = nil
            // Refused or expired, it released nothing: no session is bound to it.
            if !live || refusal != nil { handoff.sessionID = nil }
            entries.handoffs[code] = handoff
            let ticket = log.enqueue([.handoff(code, handoff)])
            guard live else { return (.expired, ticket) }
            return (refusal.map { .refused($0) } ?? .fresh(redeemed), ticket)
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

    /// Stores a device code unless a live one has its user code.
    func addDevice(_ code: SHA256Digest, _ device: DeviceAuthorization, now: Double) -> DurabilityTicket? {
        entries.withLock { entries in
            if let other = entries.userCodes[device.userCode], entries.devices[other]?.isPending(at: now) == true { return nil }
            entries.put(code, device)
            return log.enqueue([.device(code, device)])
        }
    }

    func pendingDevice(userCode: SHA256Digest, now: Double) -> (code: SHA256Digest, device: DeviceAuthorization)? {
        entries.withLock { entries in
            guard let code = entries.userCodes[userCode], let device = entries.devices[code], device.isPending(at: now) else { return nil }
            return (code, device)
        }
    }

    /// The status the code had before the decision, and the ticket of its record; nil when the
    /// decision does not fit the code.
    func decideDevice(_ code: SHA256Digest, _ decision: DeviceDecision, now: Double) -> (DeviceAuthorization.Status, DurabilityTicket)? {
        entries.withLock { entries in
            guard var device = entries.devices[code], let before = device.decide(decision, at: now) else { return nil }
            entries.put(code, device)
            return (before, log.enqueue([.device(code, device)]))
        }
    }

    /// A poll; logged only when it collects the grant (the time of a poll and the interval are
    /// kept in memory).
    func pollDevice(_ code: SHA256Digest, app: String, now: Double) -> (DevicePoll, DurabilityTicket) {
        entries.withLock { entries in
            guard var device = entries.devices[code] else { return (.unknown, .immediate) }
            let poll = device.poll(by: app, at: now)
            entries.put(code, device)
            guard case .approved = poll else { return (poll, .immediate) }
            return (poll, log.enqueue([.device(code, device)]))
        }
    }

    /// Records the token `id` as accepted until `until`; nil when it already was.
    func spend(_ id: SHA256Digest, until: Double, now: Double) -> DurabilityTicket? {
        entries.withLock { entries in
            if let remembered = entries.spent[id], remembered > now { return nil }
            entries.spent[id] = until
            return log.enqueue([.spent(id, until: until)])
        }
    }

    /// Whether the token `id` is remembered as accepted at `now`.
    func isSpent(_ id: SHA256Digest, now: Double) -> Bool {
        entries.withLock { entries in entries.spent[id].map { $0 > now } ?? false }
    }

    /// Applies a recovered record (no logging).
    func restore(_ record: StateRecord) {
        entries.withLock { entries in
            switch record {
            case .pending(let state, let pending): entries.pending[state] = pending
            case .pendingRemoved(let state): entries.pending[state] = nil
            case .handoff(let code, let handoff): entries.handoffs[code] = handoff
            case .device(let code, let device): entries.put(code, device)
            case .spent(let id, let until): entries.spent[id] = until
            case .session, .sessionRemoved: break
            }
        }
    }

    /// Drops expired logins, handoff codes and device codes (not logged: they are expired after a
    /// restart too); the grants of device codes that expired uncollected.
    func sweep(now: Double) -> [Grant] {
        entries.withLock { entries in
            entries.pending = entries.pending.filter { $0.value.expiresAt > now }
            entries.handoffs = entries.handoffs.filter { $0.value.expiresAt + EmbeddedStateStore.replayMemory > now }
            let abandoned = entries.devices.values.filter { $0.expiresAt <= now }.compactMap(\.uncollectedGrant)
            entries.devices = entries.devices.filter { $0.value.expiresAt > now }
            entries.userCodes = entries.userCodes.filter { entries.devices[$0.value] != nil }
            entries.spent = entries.spent.filter { $0.value > now }
            return abandoned
        }
    }

    /// Copies of everything, for a snapshot.
    func capture() -> (pending: [SHA256Digest: PendingAuthorization], handoffs: [SHA256Digest: Handoff],
                       devices: [SHA256Digest: DeviceAuthorization], spent: [SHA256Digest: Double]) {
        entries.withLock { ($0.pending, $0.handoffs, $0.devices, $0.spent) }
    }
}
