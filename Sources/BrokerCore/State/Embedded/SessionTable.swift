import BrokerCrypto
import Synchronization

/// The embedded store's (``EmbeddedStateStore``) sessions in memory, sharded by token hash so
/// that requests on different sessions almost never contend for the same lock. Every change is
/// handed to the change log under the shard's lock, so the journal holds a key's changes in the
/// order they were made.
///
/// Each session is held in a ``StoredSession`` of its own, never changed: a change puts a new
/// one. A dictionary keeps its slots a quarter to a half empty, and a slot of a session itself
/// (over 200 bytes) left that much memory unused per session; a slot of a reference is 8 bytes.
/// And a copy of a shard (``capture()``) shares the sessions it holds with no lock.
final class SessionTable: Sendable {
    private let shards: [Shard]
    private let log: any ChangeLog
    private let lifetimes: SessionLifetimes
    /// Scope lists shared by the sessions this store is given (sessions read from state files
    /// share theirs already, through the reader's table).
    private let scopeLists = Mutex(ScopeTable())

    private final class Shard: Sendable {
        let sessions = Mutex<[SHA256Digest: StoredSession]>([:])
    }

    init(log: any ChangeLog, lifetimes: SessionLifetimes, shardCount: Int = 64) {
        shards = (0..<shardCount).map { _ in Shard() }
        self.log = log
        self.lifetimes = lifetimes
    }

    /// The hash is uniformly random already: its first word picks the shard.
    private func shard(_ id: SHA256Digest) -> Shard {
        let word = id.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
        return shards[Int(word % UInt64(shards.count))]
    }

    /// Runs `body` on the live session `id` where it lies (no copy: on the hot path, copying a
    /// session costs a retain of each of its strings, memory no other request touches).
    func read<T: Sendable>(_ id: SHA256Digest, now: Double, _ body: (borrowing Session) -> T) -> T? {
        shard(id).sessions.withLock { sessions in
            guard let stored = sessions[id] else { return nil }
            // Fields read in place: a copy of the session would retain each of its strings.
            guard lifetimes.isLive(usedAt: stored.session.usedAt, createdAt: stored.session.createdAt, now: now) else { return nil }
            return body(stored.session)
        }
    }

    /// Marks the live session `id` used at `now`. `usedAt` is refreshed at most once a minute (a
    /// new ``StoredSession``) and only in memory (snapshots keep it): the hot path writes nothing
    /// to disk.
    func noteUse(_ id: SHA256Digest, now: Double) {
        shard(id).sessions.withLock { sessions in
            guard let stored = sessions[id], now - stored.session.usedAt > Session.useMarkInterval,
                  lifetimes.isLive(usedAt: stored.session.usedAt, createdAt: stored.session.createdAt, now: now) else { return }
            var used = stored.session
            used.usedAt = now
            sessions[id] = StoredSession(used)
        }
    }

    func put(_ session: Session) -> DurabilityTicket {
        var session = session
        session.scopes = shared(session.scopes)
        return shard(session.id).sessions.withLock { sessions in
            sessions[session.id] = StoredSession(session)
            return log.enqueue([.session(session)])
        }
    }

    /// Applies `change` to the session if it exists.
    func update(_ id: SHA256Digest, _ change: (inout Session) -> Void) -> (Session?, DurabilityTicket) {
        shard(id).sessions.withLock { sessions in
            guard var session = sessions[id]?.session else { return (nil, .immediate) }
            change(&session)
            session.scopes = shared(session.scopes)
            sessions[id] = StoredSession(session)
            return (session, log.enqueue([.session(session)]))
        }
    }

    /// Makes `session`, logged with `records` in one change (a step's other effects: the code
    /// that released it). Called under the flow table's lock (``FlowTable``), which every making
    /// and ending of a session holds, so the journal has each session's changes in their order.
    func insert(_ session: Session, logging records: [StateRecord]) -> DurabilityTicket {
        var session = session
        session.scopes = shared(session.scopes)
        return shard(session.id).sessions.withLock { sessions in
            sessions[session.id] = StoredSession(session)
            return log.enqueue(records + [.session(session)])
        }
    }

    /// Ends the session `id` if it is there (and `ending` says so of it), logged with the records
    /// `records` makes of it (its revocation, a step's other effects) in one change; the session,
    /// nil when there was none (`records` of nil are logged all the same). Called under the flow
    /// table's lock.
    func remove(_ id: SHA256Digest, if ending: (Session) -> Bool = { _ in true },
                logging records: (Session?) -> [StateRecord]) -> (Session?, DurabilityTicket) {
        shard(id).sessions.withLock { sessions in
            let removed = sessions[id].flatMap { ending($0.session) ? sessions.removeValue(forKey: id)?.session : nil }
            let logged = records(removed) + (removed == nil ? [] : [.sessionRemoved(id)])
            return (removed, logged.isEmpty ? .immediate : log.enqueue(logged))
        }
    }

    /// The ids of the sessions past their lifetimes at `now`.
    func expired(now: Double) -> [SHA256Digest] {
        shards.flatMap { shard in
            shard.sessions.withLock { sessions in sessions.compactMap { lifetimes.isLive($0.value.session, now: now) ? nil : $0.key } }
        }
    }

    private func shared(_ scopes: [String]) -> [String] {
        scopeLists.withLock { $0.shared(scopes) }
    }

    /// Applies a recovered record (no logging).
    func restore(_ session: Session) {
        shard(session.id).sessions.withLock { $0[session.id] = StoredSession(session) }
    }

    func restoreRemoval(_ id: SHA256Digest) {
        shard(id).sessions.withLock { $0[id] = nil }
    }

    /// Every shard's sessions, as copies that cost nothing until the shard next changes (the
    /// sessions in them are never changed: a change puts a new one).
    func capture() -> [[SHA256Digest: StoredSession]] {
        shards.map { shard in shard.sessions.withLock { $0 } }
    }

    /// Whether `session` is within its lifetimes at `now`.
    func isLive(_ session: Session, now: Double) -> Bool {
        lifetimes.isLive(session, now: now)
    }

    var count: Int {
        shards.reduce(0) { total, shard in total + shard.sessions.withLock { $0.count } }
    }
}

/// A session as the table holds it: one allocation, never changed.
final class StoredSession: Sendable {
    let session: Session

    init(_ session: Session) {
        self.session = session
    }
}

/// How long sessions live: unused (idle) and in all (absolute).
struct SessionLifetimes: Sendable {
    let idle: Double
    let absolute: Double

    func isLive(_ session: Session, now: Double) -> Bool {
        isLive(usedAt: session.usedAt, createdAt: session.createdAt, now: now)
    }

    func isLive(usedAt: Double, createdAt: Double, now: Double) -> Bool {
        now - usedAt < idle && now - createdAt < absolute
    }

    /// When `session` stops being live unless it is used again: its absolute lifetime's end, or
    /// sooner its idle lifetime's (counted from its last use).
    func end(of session: Session) -> Double {
        min(session.usedAt + idle, session.createdAt + absolute)
    }
}
