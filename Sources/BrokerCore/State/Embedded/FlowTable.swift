import BrokerCrypto
import Synchronization

/// The embedded store's (``EmbeddedStateStore``) small tables, under one lock: logins in
/// progress, handoff codes and device codes by the hash of their secret value, tokens accepted
/// once (back-channel logout tokens), remembered sign-outs, and the revocations owed to
/// providers. The store changes them through ``change(_:)`` and logs each change while it holds
/// the lock, so the journal has them in the order they were made; a change that also makes or
/// ends a session takes that session's shard lock inside this one (never the other way round).
final class FlowTable: Sendable {
    struct Entries {
        var pending: [SHA256Digest: PendingAuthorization] = [:]
        var handoffs: [SHA256Digest: Handoff] = [:]
        var devices: [SHA256Digest: DeviceAuthorization] = [:]
        /// Device codes by user code, while their user can act on them.
        var userCodes: [SHA256Digest: SHA256Digest] = [:]
        /// Tokens accepted once, until when they are remembered.
        var spent: [SHA256Digest: Double] = [:]
        var signOuts: [SHA256Digest: RememberedSignOut] = [:]
        var revocations: [SHA256Digest: QueuedRevocation] = [:]
        /// Revocations taken for a delivery, until when (memory only: after a restart, anything
        /// due is delivered again).
        var claimed: [SHA256Digest: Double] = [:]

        mutating func put(_ code: SHA256Digest, _ device: DeviceAuthorization) {
            devices[code] = device
            let holder = userCodes[device.userCode]
            guard case .pending = device.status else {
                if holder == code { userCodes[device.userCode] = nil }
                return
            }
            // A code issued with the same user code once this one had expired keeps it: a late
            // poll of the expired code (kept to answer `expired_token`), or a snapshot that lists
            // the older code after it, must not take the user code back.
            if let holder, holder != code, let other = devices[holder], other.expiresAt > device.expiresAt { return }
            userCodes[device.userCode] = code
        }

        /// Applies a recovered record (no logging).
        mutating func restore(_ record: StateRecord) {
            switch record {
            case .pending(let state, let pending): self.pending[state] = pending
            case .pendingRemoved(let state): pending[state] = nil
            case .handoff(let code, let handoff): handoffs[code] = handoff
            case .device(let code, let device): put(code, device)
            case .spent(let id, let until): spent[id] = until
            case .revocation(let revocation): revocations[revocation.id] = revocation
            case .revocationRemoved(let id): revocations[id] = nil
            case .signOut(let id, let signOut): signOuts[id] = signOut
            case .session, .sessionRemoved: break
            }
        }

        /// Forgets what is past its time at `now`: logins, handoff and device codes past the
        /// replay memory (until then a late poll of a device code is told it expired), the user
        /// codes of expired device codes, spent tokens and sign-outs. Expiries that end a grant
        /// are the store's.
        mutating func forgetExpired(now: Double, replayMemory: Double) {
            pending = pending.filter { $0.value.expiresAt > now }
            handoffs = handoffs.filter { $0.value.expiresAt + replayMemory > now }
            devices = devices.filter { $0.value.expiresAt + replayMemory > now }
            userCodes = userCodes.filter { devices[$0.value]?.isPending(at: now) == true }
            spent = spent.filter { $0.value > now }
            signOuts = signOuts.filter { $0.value.until > now }
        }

        /// Every record that says what the tables hold, for a snapshot.
        func records() -> [StateRecord] {
            pending.map { .pending($0.key, $0.value) } + handoffs.map { .handoff($0.key, $0.value) }
                + devices.map { .device($0.key, $0.value) } + spent.map { .spent($0.key, until: $0.value) }
                + signOuts.map { .signOut($0.key, $0.value) } + revocations.values.map { .revocation($0) }
        }
    }

    private let entries = Mutex(Entries())

    /// Runs `body` on the tables under their lock.
    func change<T>(_ body: (inout Entries) -> T) -> T {
        entries.withLock { body(&$0) }
    }

    /// A copy of the tables (copy-on-write: it costs nothing until they next change).
    func capture() -> Entries {
        entries.withLock { $0 }
    }
}
