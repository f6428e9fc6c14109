import BrokerCrypto
import Synchronization

/// Sessions in memory, sharded by token hash so that requests on different sessions almost never
/// contend for the same lock.
final class SessionStore: Sendable {
    private let shards: [Shard]

    private final class Shard: Sendable {
        let sessions = Mutex<[SHA256Digest: Session]>([:])
    }

    init(shardCount: Int = 64) {
        shards = (0..<shardCount).map { _ in Shard() }
    }

    /// The hash is uniformly random already: its first word picks the shard.
    private func shard(_ id: SHA256Digest) -> Shard {
        let word = id.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
        return shards[Int(word % UInt64(shards.count))]
    }

    func get(_ id: SHA256Digest) -> Session? {
        shard(id).sessions.withLock { $0[id] }
    }

    func put(_ session: Session) {
        shard(session.id).sessions.withLock { $0[session.id] = session }
    }

    /// Applies `change` to the session if it exists; returns the changed session.
    @discardableResult
    func update(_ id: SHA256Digest, _ change: (inout Session) -> Void) -> Session? {
        shard(id).sessions.withLock { sessions in
            guard var session = sessions[id] else { return nil }
            change(&session)
            sessions[id] = session
            return session
        }
    }

    @discardableResult
    func remove(_ id: SHA256Digest) -> Session? {
        shard(id).sessions.withLock { $0.removeValue(forKey: id) }
    }

    var count: Int {
        shards.reduce(0) { total, shard in total + shard.sessions.withLock { $0.count } }
    }
}
