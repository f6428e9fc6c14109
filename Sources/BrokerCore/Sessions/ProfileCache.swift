import BrokerCrypto
import Synchronization
import WireValues

/// Normalised profiles by session, kept for a short time so that apps calling `/profile` often
/// do not hammer the provider.
///
/// An entry holds the scopes its profile was read under and is used only while the session
/// still has those (in any order: a refresh may list them in the provider's): an incremental
/// sign-in finished on another instance adds scopes (and the claims they show) that this
/// instance's entry never saw, and the session, once this instance hears of the change, says so.
final class ProfileCache: Sendable {
    private struct Entry {
        let expiresAt: Double
        let scopes: Set<String>
        let profile: JSONValue
    }

    private let lifetime: Double
    private let entries = Mutex<[SHA256Digest: Entry]>([:])

    init(lifetime: Double) {
        self.lifetime = lifetime
    }

    /// The profile cached for `session`, unless it has expired or was read under other scopes.
    func get(_ session: Session, now: Double) -> JSONValue? {
        entries.withLock { entries in
            guard let entry = entries[session.id] else { return nil }
            guard entry.expiresAt > now, entry.scopes == Set(session.scopes) else {
                entries[session.id] = nil
                return nil
            }
            return entry.profile
        }
    }

    /// Keeps `profile`, read with the access token of `session` (its scopes are the entry's).
    func put(_ session: Session, _ profile: JSONValue, now: Double) {
        guard lifetime > 0 else { return }
        entries.withLock { entries in
            if entries.count > 10_000 { entries = entries.filter { $0.value.expiresAt > now } }
            entries[session.id] = Entry(expiresAt: now + lifetime, scopes: Set(session.scopes), profile: profile)
        }
    }

    func remove(_ session: SHA256Digest) {
        entries.withLock { $0[session] = nil }
    }
}
