import BrokerCrypto
import Synchronization
import WireValues

/// Normalised profiles by session, kept for a short time so that apps calling `/profile` often
/// do not hammer the provider.
///
/// An entry is used only while the session still holds the access token its profile was read
/// with (kept as its hash): a later grant — an incremental sign-in that adds scopes and the claims
/// they show, or one that only consents again — finished on another instance brings a new token,
/// and the session, once this instance hears of the change, says so. A refresh brings one too:
/// one more call to the provider per token lifetime, and a profile no older than its token.
final class ProfileCache: Sendable {
    private struct Entry {
        let expiresAt: Double
        let accessToken: SHA256Digest
        let profile: JSONValue
    }

    private let lifetime: Double
    private let entries = Mutex<[SHA256Digest: Entry]>([:])

    init(lifetime: Double) {
        self.lifetime = lifetime
    }

    /// The profile cached for `session`, unless it has expired or was read with another token.
    func get(_ session: Session, now: Double) -> JSONValue? {
        entries.withLock { entries in
            guard let entry = entries[session.id] else { return nil }
            guard entry.expiresAt > now, entry.accessToken == SHA256.hash(session.accessToken) else {
                entries[session.id] = nil
                return nil
            }
            return entry.profile
        }
    }

    /// Keeps `profile`, read with the access token of `session`.
    func put(_ session: Session, _ profile: JSONValue, now: Double) {
        guard lifetime > 0 else { return }
        entries.withLock { entries in
            if entries.count > 10_000 { entries = entries.filter { $0.value.expiresAt > now } }
            entries[session.id] = Entry(expiresAt: now + lifetime, accessToken: SHA256.hash(session.accessToken), profile: profile)
        }
    }

    func remove(_ session: SHA256Digest) {
        entries.withLock { $0[session] = nil }
    }
}
