import BrokerCrypto
import Foundation
import Logging
import Postgres
import Synchronization

/// The state in PostgreSQL, shared by several broker instances (`state.backend: postgres`;
/// docs/several-instances.md). Rows are sealed (``RowSealer``); each instance keeps a
/// bounded cache of sessions (``SessionCache``) kept coherent by `LISTEN/NOTIFY` on
/// ``channel``: every change to a session row bumps its version and notifies `id:version` in
/// the same transaction. A change is committed (synchronous commit) before its method returns;
/// logins in progress are committed without waiting for the flush (`synchronous_commit = off`),
/// as the contract allows.
///
/// Concurrency across instances: `updateSession` is compare-and-set on the row version (retried
/// on a concurrent change, so none is lost); `redeemHandoff` and `takeLogin` lock or delete the
/// row in one statement or transaction, so one instance wins; refreshes take a transaction-level
/// advisory lock per session on a connection of their own and a lease that outlives it
/// (``whileRefreshing(_:_:)``); one instance at a time sweeps (a try-lock).
final class PostgresStateStore: StateStore {
    /// The notification channel for session changes.
    static let channel = "broker_sessions"
    /// The advisory lock key of the sweep.
    static let sweepLockKey: Int64 = 0x746F_6B65_6E5F_7377

    let pool: PostgresPool
    let lockPool: PostgresPool
    let listener: PostgresListener
    let cache: SessionCache
    let sealer: RowSealer
    let index: BlindIndex
    let lifetimes: SessionLifetimes
    let clock: BrokerClock
    let logger: Logger
    let metrics: BrokerMetrics?
    /// Longest a refresh may wait for another instance's refresh of the same session.
    let refreshLockWaitSeconds: Int
    let liveSessions = Atomic<Int>(0)
    private let updating = KeyedLock()
    let lastFailure = Mutex<String?>(nil)

    /// Connects, brings the schema up to date, and starts listening (waiting for it, up to the
    /// statement timeout: a session cached before would miss its notifications).
    static func open(
        settings: PostgresSettings, keys: StateKeys, lifetimes: SessionLifetimes, refreshLockWaitSeconds: Int,
        clock: @escaping BrokerClock, logger: Logger, metrics: BrokerMetrics? = nil
    ) async throws(StateOpenError) -> PostgresStateStore {
        guard let url = settings.url else { throw StateOpenError(description: "state.postgres.url is not set") }
        let options = PostgresConnection.Options(
            url: url, password: settings.password?.reveal(), connectTimeoutSeconds: 5,
            statementTimeoutSeconds: settings.statementTimeoutSeconds
        )
        let pool = PostgresPool(options: options, size: settings.poolSize, acquireTimeout: .seconds(settings.statementTimeoutSeconds))
        do {
            let applied = try await PostgresSchema.migrate(pool)
            if !applied.isEmpty { logger.notice("database schema migrated", metadata: ["versions": "\(applied)", "now": "\(PostgresSchema.latest)"]) }
        } catch {
            pool.close()
            throw StateOpenError(description: "cannot use the PostgreSQL store: \(error.description)")
        }
        var lockOptions = options
        lockOptions.statementTimeoutSeconds = 0
        let store = PostgresStateStore(
            pool: pool, lockPool: PostgresPool(options: lockOptions, size: settings.poolSize, acquireTimeout: .seconds(refreshLockWaitSeconds)),
            options: options, cacheCapacity: settings.cacheSessions, keys: keys, lifetimes: lifetimes,
            refreshLockWaitSeconds: refreshLockWaitSeconds, clock: clock, logger: logger, metrics: metrics
        )
        await store.countSessions()
        // Ready once it hears other instances' changes: a session cached before would miss them.
        let listening = ContinuousClock.now + .seconds(settings.statementTimeoutSeconds)
        while !store.listener.isListening, ContinuousClock.now < listening { try? await Task.sleep(for: .milliseconds(10)) }
        return store
    }

    private init(
        pool: PostgresPool, lockPool: PostgresPool, options: PostgresConnection.Options, cacheCapacity: Int, keys: StateKeys,
        lifetimes: SessionLifetimes, refreshLockWaitSeconds: Int, clock: @escaping BrokerClock, logger: Logger, metrics: BrokerMetrics?
    ) {
        let cache = SessionCache(capacity: cacheCapacity, lifetimes: lifetimes)
        self.pool = pool
        self.lockPool = lockPool
        self.cache = cache
        sealer = RowSealer(keys: keys)
        index = BlindIndex(stateKeys: keys)
        self.lifetimes = lifetimes
        self.clock = clock
        self.logger = logger
        self.metrics = metrics
        self.refreshLockWaitSeconds = refreshLockWaitSeconds
        listener = PostgresListener(
            options: options, channel: Self.channel,
            onNotification: { payload in
                guard let (id, version, sentAt) = Self.parseNotification(payload) else { return }
                cache.invalidate(id, below: version)
                metrics?.notificationArrived(lagSeconds: clock() - sentAt)
            },
            onListening: { resumed in
                // Whatever was cached before listening may have missed its notification.
                cache.clear()
                if resumed { logger.warning("session notifications resumed after a gap; the session cache was emptied") }
            }
        )
    }

    // MARK: Rows

    /// When a session stops being live, for the `expires_at` column.
    private func expiry(_ session: Session) -> Double {
        min(session.usedAt + lifetimes.idle, session.createdAt + lifetimes.absolute)
    }

    /// `id:version:sent`, `sent` in milliseconds of the sender's clock (for the lag metric).
    private func notification(_ id: SHA256Digest, _ version: Int64) -> String { "\(id.hex):\(version):\(Int64(clock() * 1000))" }

    private static func parseNotification(_ payload: String) -> (SHA256Digest, Int64, Double)? {
        let parts = payload.split(separator: ":")
        guard parts.count == 3, let version = Int64(parts[1]), let sent = Int64(parts[2]), let id = SHA256Digest(hex: parts[0]) else { return nil }
        return (id, version, Double(sent) / 1000)
    }

    /// The `subject_index` and `sid_index` columns of `session`'s row (``BlindIndex``).
    private func indexColumns(_ session: Session) -> [PostgresValue] {
        [.bytes(index.value(.subject, provider: session.provider, session.subject)),
         session.providerSessionID.map { .bytes(index.value(.providerSession, provider: session.provider, $0)) } ?? .null]
    }

    private func sealedSession(_ session: Session) throws(StateWriteError) -> [UInt8] {
        do {
            return try sealer.seal(.session(session), table: "sessions", key: session.id)
        } catch {
            throw StateWriteError(description: "cannot seal a session: \(error)")
        }
    }

    /// The session in a row. A row sealed under a key this instance does not have (another
    /// instance already has the next key of a rotation) is the store failing for this instance:
    /// it throws, so that the request is a 503 to retry — never "no such session", which would end
    /// the session for its client, nor a found session a back-channel logout skips (a search by
    /// subject or `sid` does not find rows indexed under such a key at all: the three-step
    /// rotation of docs/several-instances.md avoids both). A row that does not open under a key
    /// this instance has (altered outside the broker) is logged and treated as absent.
    func openSession(
        _ rows: PostgresRows, _ row: Int, id: SHA256Digest, keyColumn: Int, sealedColumn: Int, usedAtColumn: Int?
    ) throws(StateReadError) -> Session? {
        guard let keyID = rows.int(row, keyColumn), let sealed = rows.bytes(row, sealedColumn) else { return nil }
        guard sealer.hasKey(keyID) else {
            logger.error("a session row is sealed under a state key this instance does not have", metadata: ["key_id": "\(UInt64(bitPattern: keyID))"])
            throw StateReadError(description: "a session row is sealed under a state key this instance does not have")
        }
        guard case .session(var session) = sealer.open(sealed, keyID: keyID, table: "sessions", key: id) else {
            logger.error("a session row does not open with the configured state keys; it is treated as absent")
            return nil
        }
        if let column = usedAtColumn, let usedAt = rows.double(row, column) { session.usedAt = max(session.usedAt, usedAt) }
        return session
    }

    /// Runs a statement batch, recording whether the database was reachable. With `patience`,
    /// a connection failure is retried for about that long (on a new connection), for a change
    /// that must not be given up lightly: the tokens of a refresh the provider has already made.
    func run<T: Sendable>(
        _ operation: String = "read", patience: Duration = .zero, _ body: @escaping @Sendable (PostgresConnection) throws(PostgresError) -> T
    ) async throws(PostgresError) -> T {
        let deadline = ContinuousClock.now + patience
        while true {
            let started = ContinuousClock.now
            do {
                let value = try await pool.withConnection(body)
                metrics?.stateStoreCall(operation, seconds: (ContinuousClock.now - started).seconds, reachable: true)
                lastFailure.withLock { $0 = nil }
                return value
            } catch {
                metrics?.stateStoreCall(operation, seconds: (ContinuousClock.now - started).seconds, reachable: !error.isConnectionFailure)
                if error.isConnectionFailure { lastFailure.withLock { $0 = error.description } }
                guard error.isConnectionFailure, ContinuousClock.now < deadline else { throw error }
                try? await Task.sleep(for: .milliseconds(250))
            }
        }
    }

    func write<T: Sendable>(
        patience: Duration = .zero, _ body: @escaping @Sendable (PostgresConnection) throws(PostgresError) -> T
    ) async throws(StateWriteError) -> T {
        do {
            return try await run("write", patience: patience) { connection throws(PostgresError) in try connection.transaction(body) }
        } catch {
            throw StateWriteError(description: error.description)
        }
    }

    // MARK: StateStore: sessions

    func readSession<T: Sendable>(_ id: SHA256Digest, now: Double, _ body: (borrowing Session) -> T) -> T? {
        cache.read(id, now: now, body)
    }

    var holdsEverySession: Bool { false }

    func loadSession(_ id: SHA256Digest, now: Double) async throws(StateReadError) -> Session? {
        let generation = cache.currentGeneration
        let rows: PostgresRows
        do {
            rows = try await run { connection throws(PostgresError) in
                try connection.execute("SELECT version, key_id, sealed, used_at FROM broker_sessions WHERE id = $1 AND expires_at > $2",
                                       [.bytes(id.bytes), .double(now)])
            }
        } catch {
            throw StateReadError(description: error.description)
        }
        guard rows.count == 1, let version = rows.int(0, 0),
              let session = try openSession(rows, 0, id: id, keyColumn: 1, sealedColumn: 2, usedAtColumn: 3),
              lifetimes.isLive(session, now: now) else { return nil }
        cache.insert(session, version: version, ifUnchangedSince: generation)
        return session
    }

    func saveSession(_ session: Session, createdBy code: SHA256Digest?) async throws(StateWriteError) -> Bool {
        let sealed = try sealedSession(session)
        let keyID = sealer.currentKeyID
        let expiresAt = expiry(session)
        let indexed = indexColumns(session)
        let replayed = try await write { connection throws(PostgresError) -> Bool in
            try connection.execute("""
                INSERT INTO broker_sessions (id, version, key_id, sealed, provider, app, created_at, used_at, expires_at, subject_index, sid_index)
                VALUES ($1, 1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                """, [.bytes(session.id.bytes), .int(keyID), .bytes(sealed), .text(session.provider), .text(session.app),
                      .double(session.createdAt), .double(session.usedAt), .double(expiresAt)] + indexed)
            guard let code else { return false }
            let rows = try connection.execute("UPDATE broker_handoffs SET session_id = $2 WHERE code = $1 RETURNING replayed_before_binding",
                                              [.bytes(code.bytes), .bytes(session.id.bytes)])
            return rows.count == 1 && rows.bool(0, 0) == true
        }
        cache.insert(session, version: 1)
        liveSessions.wrappingAdd(1, ordering: .relaxed)
        return !replayed
    }

    /// Stores sessions copied from elsewhere (`state import`) in one transaction, each unless
    /// one with its id is there: how many were stored.
    func importSessions(_ sessions: [Session]) async throws(StateWriteError) -> Int {
        var values: [[PostgresValue]] = []
        for session in sessions {
            values.append([.bytes(session.id.bytes), .int(sealer.currentKeyID), .bytes(try sealedSession(session)), .text(session.provider),
                         .text(session.app), .double(session.createdAt), .double(session.usedAt), .double(expiry(session))]
                          + indexColumns(session))
        }
        let rows = values
        let stored = try await write { connection throws(PostgresError) -> Int in
            var stored = 0
            for row in rows {
                stored += try connection.execute("""
                    INSERT INTO broker_sessions (id, version, key_id, sealed, provider, app, created_at, used_at, expires_at, subject_index, sid_index)
                    VALUES ($1, 1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (id) DO NOTHING
                    """, row).affected
            }
            return stored
        }
        liveSessions.wrappingAdd(stored, ordering: .relaxed)
        return stored
    }

    func updateSession(_ id: SHA256Digest, _ change: (inout Session) -> Void) async throws(StateWriteError) -> Session? {
        try await updating.withLock(id) { () async throws(StateWriteError) -> Session? in try await compareAndSet(id, change) }
    }

    /// Compare-and-set on the row version: a concurrent change from another instance makes the
    /// write miss, and the change is applied again to what that change left. A connection lost
    /// on the way is retried for a few seconds — and, for the refresh that holds the session's
    /// lease, for as long as the lease holds and a minute more: the tokens the provider has just
    /// rotated are then the only ones that work, so giving up sooner would lose the session (a
    /// restart or failover of PostgreSQL can outlast the lease). No other instance refreshes the
    /// session while the lease holds; past it, the write is made only while no other instance
    /// holds a lease on the session (one that took it would refresh with the token this one
    /// replaced). The version check makes a retry of a write that did commit harmless (it
    /// misses, and the change is applied again to the committed row).
    private func compareAndSet(_ id: SHA256Digest, _ change: (inout Session) -> Void) async throws(StateWriteError) -> Session? {
        for attempt in 0..<32 {
            if attempt > 0 { try? await Task.sleep(for: .milliseconds(Int.random(in: 1...(5 * attempt)))) }
            let now = clock()
            let rows: PostgresRows
            do {
                rows = try await run(patience: Self.patience(updating: id)) { connection throws(PostgresError) in
                    try connection.execute("SELECT version, key_id, sealed, used_at FROM broker_sessions WHERE id = $1 AND expires_at > $2",
                                           [.bytes(id.bytes), .double(now)])
                }
            } catch {
                throw StateWriteError(description: error.description)
            }
            guard rows.count == 1, let version = rows.int(0, 0) else { return nil }
            let opened: Session?
            do {
                opened = try openSession(rows, 0, id: id, keyColumn: 1, sealedColumn: 2, usedAtColumn: 3)
            } catch {
                throw StateWriteError(description: error.description)
            }
            guard var session = opened else { return nil }
            change(&session)
            let changed = session
            let sealed = try sealedSession(changed)
            let keyID = sealer.currentKeyID
            let expiresAt = expiry(changed)
            let indexed = indexColumns(changed)
            let next = version + 1
            let payload = notification(id, next)
            let lease = Self.lease(on: id)
            let written = try await write(patience: Self.patience(updating: id)) { connection throws(PostgresError) -> Bool in
                try lease?.lockRow(on: connection)
                let updated = try connection.execute("""
                    UPDATE broker_sessions SET version = $3, key_id = $4, sealed = $5, used_at = greatest(used_at, $6), expires_at = greatest(expires_at, $7),
                        subject_index = $8, sid_index = $9
                    WHERE id = $1 AND version = $2\(lease == nil ? "" : HeldLease.noOtherLiveLease)
                    """, [.bytes(id.bytes), .int(version), .int(next), .int(keyID), .bytes(sealed), .double(changed.usedAt), .double(expiresAt)]
                        + indexed + (lease.map { [.double($0.heldUntil)] } ?? []))
                guard updated.affected == 1 else { return false }
                try connection.execute("SELECT pg_notify($1, $2)", [.text(Self.channel), .text(payload)])
                return true
            }
            if written {
                cache.insert(session, version: next)
                return session
            }
        }
        throw StateWriteError(description: "the session changed too often to update")
    }

    /// A session sealed under a key this instance lacks is left in place (a 503): removed here,
    /// its grant could not be revoked at its provider.
    func removeSession(_ id: SHA256Digest) async throws(StateWriteError) -> Session? {
        let payload = notification(id, .max)
        let sealer = sealer
        let removed = try await write { connection throws(PostgresError) -> PostgresRows? in
            let found = try connection.execute("SELECT key_id FROM broker_sessions WHERE id = $1 FOR UPDATE", [.bytes(id.bytes)])
            if found.count == 1, let keyID = found.int(0, 0), !sealer.hasKey(keyID) { return nil }
            let rows = try connection.execute("DELETE FROM broker_sessions WHERE id = $1 RETURNING key_id, sealed, expires_at",
                                              [.bytes(id.bytes)])
            if rows.count == 1 { try connection.execute("SELECT pg_notify($1, $2)", [.text(Self.channel), .text(payload)]) }
            return rows
        }
        guard let rows = removed else {
            throw StateWriteError(description: "a session row is sealed under a state key this instance does not have")
        }
        cache.remove(id)
        guard rows.count == 1 else { return nil }
        liveSessions.wrappingSubtract(1, ordering: .relaxed)
        guard (rows.double(0, 2) ?? 0) > clock() else { return nil }
        return try? openSession(rows, 0, id: id, keyColumn: 0, sealedColumn: 1, usedAtColumn: nil)
    }
}
