import BrokerCrypto
import Synchronization

/// The sessions one instance keeps in memory in front of PostgreSQL, each with the row version
/// it was read or written at, sharded like the embedded store so that `GET /token` answers from
/// memory on the server thread without contention.
///
/// Coherence: every change to a session row notifies `(id, version)`; an instance drops its copy
/// when it is older (``invalidate(_:below:)``). A load that raced with a notification must not
/// put back the row it read before the change: ``insert(_:version:ifUnchangedSince:)`` refuses
/// it when the id was invalidated after the load began. Bounded: past `capacity` a shard drops
/// entries (the database keeps them; the next read loads them again).
final class SessionCache: Sendable {
    private struct Entry {
        var session: Session
        var version: Int64
    }

    private final class Shard: Sendable {
        let entries = Mutex<[SHA256Digest: Entry]>([:])
    }

    private let shards: [Shard]
    private let capacityPerShard: Int
    private let lifetimes: SessionLifetimes
    /// Counts invalidations; a load remembers it when it starts.
    private let generation = Atomic<UInt64>(0)
    /// When each recently invalidated id was last invalidated (generation), for racing loads.
    private let invalidated = Mutex<[SHA256Digest: UInt64]>([:])
    /// Sessions whose `usedAt` moved in memory since the last flush to the database.
    private let touched = Mutex<Set<SHA256Digest>>([])

    init(capacity: Int, lifetimes: SessionLifetimes, shardCount: Int = 64) {
        shards = (0..<shardCount).map { _ in Shard() }
        capacityPerShard = max(1, capacity / shardCount)
        self.lifetimes = lifetimes
    }

    private func shard(_ id: SHA256Digest) -> Shard {
        let word = id.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
        return shards[Int(word % UInt64(shards.count))]
    }

    /// Runs `body` on the cached live session `id` in place, marking it used (at most once a
    /// minute, flushed to the database by ``takeTouched()``).
    func read<T: Sendable>(_ id: SHA256Digest, now: Double, _ body: (borrowing Session) -> T) -> T? {
        let (result, used) = shard(id).entries.withLock { entries -> (T?, Bool) in
            guard let index = entries.index(forKey: id) else { return (nil, false) }
            // In place: a copy of the session would retain each of its strings (the hot path).
            let usedAt = entries.values[index].session.usedAt
            guard lifetimes.isLive(usedAt: usedAt, createdAt: entries.values[index].session.createdAt, now: now) else { return (nil, false) }
            let used = now - usedAt > 60
            if used { entries.values[index].session.usedAt = now }
            return (body(entries.values[index].session), used)
        }
        if used { _ = touched.withLock { $0.insert(id) } }
        return result
    }

    /// The generation a load starts at, for ``insert(_:version:ifUnchangedSince:)``.
    var currentGeneration: UInt64 { generation.load(ordering: .acquiring) }

    /// Keeps `session` at `version` (this instance's own write, or a load that began at
    /// `generation` if no invalidation of the id came since).
    func insert(_ session: Session, version: Int64, ifUnchangedSince generation: UInt64? = nil) {
        if let generation, let last = invalidated.withLock({ $0[session.id] }), last > generation { return }
        shard(session.id).entries.withLock { entries in
            if let current = entries[session.id], current.version > version { return }
            if entries.count >= capacityPerShard, entries[session.id] == nil, let victim = entries.keys.first {
                entries[victim] = nil
            }
            entries[session.id] = Entry(session: session, version: version)
        }
    }

    /// Drops the copy of `id` older than `version` (another instance changed or removed it).
    func invalidate(_ id: SHA256Digest, below version: Int64) {
        let now = generation.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue
        invalidated.withLock { invalidated in
            if invalidated.count > 100_000 { invalidated.removeAll(keepingCapacity: true) }
            invalidated[id] = now
        }
        shard(id).entries.withLock { entries in
            if let current = entries[id], current.version < version { entries[id] = nil }
        }
    }

    func remove(_ id: SHA256Digest) {
        shard(id).entries.withLock { $0[id] = nil }
    }

    /// Forgets everything (the notification connection dropped: changes may have been missed).
    func clear() {
        generation.wrappingAdd(1, ordering: .acquiringAndReleasing)
        invalidated.withLock { $0.removeAll() }
        for shard in shards { shard.entries.withLock { $0.removeAll() } }
    }

    /// The sessions marked used since the last call, with their `usedAt`.
    func takeTouched() -> [(SHA256Digest, Double)] {
        let ids = touched.withLock { touched in defer { touched.removeAll() }; return touched }
        return ids.compactMap { id in shard(id).entries.withLock { $0[id].map { (id, $0.session.usedAt) } } }
    }

    var count: Int { shards.reduce(0) { $0 + $1.entries.withLock { $0.count } } }
}
