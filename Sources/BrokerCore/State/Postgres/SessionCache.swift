import BrokerCrypto
import Synchronization

/// The sessions one instance keeps in memory in front of PostgreSQL, each with the row version
/// it was read or written at, sharded like the embedded store so that `GET /token` answers from
/// memory on the server thread without contention.
///
/// Coherence: every change to a session row notifies `(id, version)`; an instance drops its copy
/// when it is older (``invalidate(_:below:)``). A load that raced with a notification must not
/// put back the row it read before the change: ``insert(_:version:since:written:)`` refuses
/// it when the id was invalidated after the load began, or when the cache forgot since then what
/// it invalidated (``clear()`` after a lost notification connection, or the shard's record of
/// invalidations reaching its bound). Nor must this instance's own write, once committed, put
/// back a row another instance changed or removed right after it: its notification may come
/// before the write's own caller resumes, so the write is refused when a newer version (a
/// removal's is the largest) was notified since it began. The check and the insert are one step under the shard's
/// lock, as an invalidation's record and drop are: a notification cannot fall between them.
/// Bounded: past `capacity` a shard drops entries (the database keeps them; the next read loads
/// them again).
///
/// Use: a read marks the session used in memory at most once a minute, as the embedded store
/// does, and queues its `used_at` for the database once it is ``writeBackInterval`` ahead of
/// what the database holds (``takeUsed()``): the idle expiry in the database lags by at most
/// that interval, and a busy instance writes each active session's row at most once in it.
final class SessionCache: Sendable {
    private struct Entry {
        var session: Session
        var version: Int64
        /// The `used_at` the database holds, or is about to (queued).
        var storedUsedAt: Double
    }

    private struct ShardState {
        var entries: [SHA256Digest: Entry] = [:]
        /// Sessions whose `used_at` is queued for the database.
        var used: [SHA256Digest] = []
        /// When each recently invalidated id was last invalidated (generation), and the newest
        /// version notified for it, for racing loads and writes.
        var invalidated: [SHA256Digest: (generation: UInt64, version: Int64)] = [:]
        /// Loads that began before this generation are not kept: what was invalidated before it
        /// is forgotten.
        var forgottenBefore: UInt64 = 0
    }

    /// Invalidations a shard remembers (128,000 in all with 64 shards, a few MB) before it
    /// forgets them; loads under way then are not kept (they load again on their next read).
    private static let invalidationsKeptPerShard = 2_000

    private final class Shard: Sendable {
        let state = Mutex(ShardState())
    }

    private let shards: [Shard]
    private let capacityPerShard: Int
    private let lifetimes: SessionLifetimes
    /// How far a session's use in memory may run ahead of its `used_at` in the database: 1% of
    /// the idle lifetime, from a minute to an hour.
    let writeBackInterval: Double
    /// Counts invalidations and clears; a load remembers it when it starts.
    private let generation = Atomic<UInt64>(0)

    init(capacity: Int, lifetimes: SessionLifetimes, shardCount: Int = 64) {
        shards = (0..<shardCount).map { _ in Shard() }
        capacityPerShard = max(1, capacity / shardCount)
        self.lifetimes = lifetimes
        writeBackInterval = min(3600, max(60, lifetimes.idle / 100))
    }

    private func shard(_ id: SHA256Digest) -> Shard {
        let word = id.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
        return shards[Int(word % UInt64(shards.count))]
    }

    /// Runs `body` on the cached live session `id` in place.
    func read<T: Sendable>(_ id: SHA256Digest, now: Double, _ body: (borrowing Session) -> T) -> T? {
        shard(id).state.withLock { state -> T? in
            guard let index = state.entries.index(forKey: id) else { return nil }
            // In place: a copy of the session would retain each of its strings (the hot path).
            let usedAt = state.entries.values[index].session.usedAt
            guard lifetimes.isLive(usedAt: usedAt, createdAt: state.entries.values[index].session.createdAt, now: now) else { return nil }
            return body(state.entries.values[index].session)
        }
    }

    /// Marks the cached live session `id` used at `now` (at most once a minute), and queues it
    /// for the database's `used_at` once `writeBackInterval` passed since it was last written.
    func noteUse(_ id: SHA256Digest, now: Double) {
        let interval = writeBackInterval
        shard(id).state.withLock { state in
            guard let index = state.entries.index(forKey: id) else { return }
            let usedAt = state.entries.values[index].session.usedAt
            guard now - usedAt > Session.useMarkInterval, lifetimes.isLive(usedAt: usedAt, createdAt: state.entries.values[index].session.createdAt, now: now) else { return }
            state.entries.values[index].session.usedAt = now
            if now - state.entries.values[index].storedUsedAt >= interval {
                state.entries.values[index].storedUsedAt = now
                state.used.append(id)
            }
        }
    }

    /// The generation a load or a write starts at, for ``insert(_:version:since:written:)``.
    var currentGeneration: UInt64 { generation.load(ordering: .acquiring) }

    /// Keeps `session` at `version` as the database holds it: a load that began at `generation`
    /// if no invalidation of the id came since; this instance's own write (`written`), begun at
    /// `generation`, if no newer version of it was notified since. Either is refused when the
    /// cache forgot since `generation` what it was told.
    func insert(_ session: Session, version: Int64, since generation: UInt64, written: Bool = false) {
        shard(session.id).state.withLock { state in
            let refused = generation < state.forgottenBefore
                || state.invalidated[session.id].map { $0.generation > generation && (!written || $0.version > version) } == true
            if refused {
                // A copy older than this write is stale whatever came since: the next read loads.
                if written, let current = state.entries[session.id], current.version < version { state.entries[session.id] = nil }
                return
            }
            if let current = state.entries[session.id], current.version > version { return }
            if state.entries.count >= capacityPerShard, state.entries[session.id] == nil, let victim = state.entries.keys.first {
                state.entries[victim] = nil
            }
            state.entries[session.id] = Entry(session: session, version: version, storedUsedAt: session.usedAt)
        }
    }

    /// Drops the copy of `id` older than `version` (another instance changed or removed it).
    func invalidate(_ id: SHA256Digest, below version: Int64) {
        let now = generation.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue
        shard(id).state.withLock { state in
            if state.invalidated.count >= Self.invalidationsKeptPerShard {
                state.invalidated.removeAll(keepingCapacity: true)
                state.forgottenBefore = now
            }
            state.invalidated[id] = (now, max(version, state.invalidated[id]?.version ?? .min))
            if let current = state.entries[id], current.version < version { state.entries[id] = nil }
        }
    }

    func remove(_ id: SHA256Digest) {
        shard(id).state.withLock { $0.entries[id] = nil }
    }

    /// Forgets everything (the notification connection dropped: changes may have been missed).
    func clear() {
        let now = generation.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue
        for shard in shards { shard.state.withLock { $0 = ShardState(forgottenBefore: now) } }
    }

    /// The sessions whose use was queued for the database since the last call, with their
    /// `usedAt` (those still cached).
    func takeUsed() -> [(SHA256Digest, Double)] {
        var used: [(SHA256Digest, Double)] = []
        for shard in shards {
            shard.state.withLock { state in
                for id in state.used {
                    if let entry = state.entries[id] { used.append((id, entry.session.usedAt)) }
                }
                state.used.removeAll()
            }
        }
        return used
    }

    /// Queues again the use of `used` sessions whose write to the database failed (those still
    /// cached), for the next write-back.
    func requeueUsed(_ used: some Sequence<(SHA256Digest, Double)>) {
        for (id, _) in used {
            shard(id).state.withLock { state in
                if state.entries[id] != nil, !state.used.contains(id) { state.used.append(id) }
            }
        }
    }

    var count: Int { shards.reduce(0) { $0 + $1.state.withLock { $0.entries.count } } }
}
