import BrokerCrypto
import Synchronization
import WireValues

/// Normalised profiles by session, kept for a short time so that apps calling `/profile` often
/// do not hammer the provider.
final class ProfileCache: Sendable {
    private let lifetime: Double
    private let entries = Mutex<[SHA256Digest: (expiresAt: Double, profile: JSONValue)]>([:])

    init(lifetime: Double) {
        self.lifetime = lifetime
    }

    func get(_ session: SHA256Digest, now: Double) -> JSONValue? {
        entries.withLock { entries in
            guard let entry = entries[session] else { return nil }
            guard entry.expiresAt > now else {
                entries[session] = nil
                return nil
            }
            return entry.profile
        }
    }

    func put(_ session: SHA256Digest, _ profile: JSONValue, now: Double) {
        guard lifetime > 0 else { return }
        entries.withLock { entries in
            if entries.count > 10_000 { entries = entries.filter { $0.value.expiresAt > now } }
            entries[session] = (now + lifetime, profile)
        }
    }

    func remove(_ session: SHA256Digest) {
        entries.withLock { $0[session] = nil }
    }
}
