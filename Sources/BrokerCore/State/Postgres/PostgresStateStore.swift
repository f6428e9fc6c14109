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
/// on a concurrent change, so none is lost); a code's step locks its row (`FOR UPDATE`) and
/// carries out its effects in the same transaction, so one instance wins; refreshes take a
/// transaction-level advisory lock per session on a connection of their own and a lease that
/// outlives it (``whileRefreshing(_:_:)``); queued revocations are claimed with `SKIP LOCKED`;
/// one instance at a time sweeps (a try-lock). A commit whose acknowledgement is lost is looked
/// up (`txid_status`) before the change is reported made or not (``write(patience:_:)``).
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
    /// Serialises this instance's updates of one session.
    let updating = KeyedLock()
    /// The database's outages, logged once as each begins and ends.
    let outage: OutageWatch

    /// Connects, brings the schema up to date, and starts listening (waiting for it, up to the
    /// statement timeout: a session cached before would miss its notifications).
    /// `faults` are a test's (``PostgresFaults``).
    static func open(
        settings: PostgresSettings, keys: StateKeys, lifetimes: SessionLifetimes, refreshLockWaitSeconds: Int,
        clock: @escaping BrokerClock, logger: Logger, metrics: BrokerMetrics? = nil, faults: PostgresFaults? = nil
    ) async throws(StateOpenError) -> PostgresStateStore {
        guard let url = settings.url else { throw StateOpenError(description: "state.postgres.url is not set") }
        let options = PostgresConnection.Options(
            url: url, password: settings.password?.reveal(), connectTimeoutSeconds: 5,
            statementTimeoutSeconds: settings.statementTimeoutSeconds, faults: faults
        )
        let pool = PostgresPool(options: options, size: settings.poolSize, acquireTimeout: .seconds(settings.statementTimeoutSeconds))
        do {
            let schema = try await PostgresSchema.migrate(pool)
            if !schema.applied.isEmpty {
                logger.notice("database schema migrated", metadata: [
                    "versions": .array(schema.applied.map { .stringConvertible($0) }), "now": .stringConvertible(PostgresSchema.latest),
                ])
            } else if schema.newerButReadable {
                logger.notice("the database's schema is newer than this broker's, and declares that this broker may run on it", metadata: [
                    "database": .stringConvertible(schema.version), "broker": .stringConvertible(PostgresSchema.latest),
                ])
            }
        } catch {
            pool.close()
            throw StateOpenError(description: "cannot use the PostgreSQL store: \(error.description)", permanent: error.newerSchema)
        }
        var lockOptions = options
        lockOptions.statementTimeoutSeconds = 0
        let store = PostgresStateStore(
            pool: pool, lockPool: PostgresPool(options: lockOptions, size: settings.poolSize, acquireTimeout: .seconds(refreshLockWaitSeconds)),
            options: options, cacheCapacity: settings.cacheSessions, keys: keys, lifetimes: lifetimes,
            refreshLockWaitSeconds: refreshLockWaitSeconds, clock: clock, logger: logger, metrics: metrics
        )
        metrics?.stateStoreOpened()
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
        let outage = OutageWatch("the PostgreSQL state store", logger: logger)
        self.outage = outage
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
            },
            onDropped: { reason in outage.failed(reason) }
        )
    }

    // MARK: Rows

    /// `id:version:sent`, `sent` in milliseconds of the sender's clock (for the lag metric).
    func notification(_ id: SHA256Digest, _ version: Int64) -> String { "\(id.hex):\(version):\(Int64(clock() * 1000))" }

    private static func parseNotification(_ payload: String) -> (SHA256Digest, Int64, Double)? {
        let parts = payload.split(separator: ":")
        guard parts.count == 3, let version = Int64(parts[1]), let sent = Int64(parts[2]), let id = SHA256Digest(hex: parts[0]) else { return nil }
        return (id, version, Double(sent) / 1000)
    }

    /// Runs a statement batch, recording whether the database was reachable. With `patience`,
    /// a connection failure is retried for about that long (on a new connection), for a change
    /// that must not be given up lightly: the tokens of a refresh the provider has already made.
    /// A commit whose acknowledgement was lost is never run again here (``write(patience:_:)``
    /// looks it up).
    func run<T: Sendable>(
        _ operation: String = "read", patience: Duration = .zero, _ body: @escaping @Sendable (PostgresConnection) throws(PostgresError) -> T
    ) async throws(PostgresError) -> T {
        let deadline = ContinuousClock.now + patience
        while true {
            let started = ContinuousClock.now
            do {
                let value = try await pool.withConnection(body)
                metrics?.stateStoreCall(operation, seconds: (ContinuousClock.now - started).seconds, reachable: true)
                outage.succeeded()
                return value
            } catch {
                metrics?.stateStoreCall(operation, seconds: (ContinuousClock.now - started).seconds, reachable: !error.isConnectionFailure)
                if error.isConnectionFailure { outage.failed(error.description) }
                if case .commitUnacknowledged = error { throw error }
                guard error.isConnectionFailure, ContinuousClock.now < deadline else { throw error }
                try? await Task.sleep(for: .milliseconds(250))
            }
        }
    }

    /// Runs `body` in a transaction, retried through a lost connection as ``run(_:patience:_:)``
    /// does. When the acknowledgement of its commit is lost, the transaction is looked up on
    /// another connection before anything is answered: committed, it returns what `body`
    /// returned; rolled back, `body` runs again (a fresh transaction, on what the store holds
    /// now; three times at most); unknown after a while, it throws — what is returned is what
    /// happened.
    func write<T: Sendable>(
        patience: Duration = .zero, _ body: @escaping @Sendable (PostgresConnection) throws(PostgresError) -> T
    ) async throws(StateWriteError) -> T {
        let deadline = ContinuousClock.now + patience
        for _ in 0..<3 {
            let outcome = AttemptOutcome<T>()
            do {
                return try await run("write", patience: max(.zero, deadline - ContinuousClock.now)) { connection throws(PostgresError) in
                    try connection.transaction { connection throws(PostgresError) in
                        let value = try body(connection)
                        outcome.keep(value)
                        return value
                    }
                }
            } catch {
                guard case .commitUnacknowledged(let transaction, _) = error else { throw StateWriteError(description: error.description) }
                switch await commitStatus(of: transaction, until: max(deadline, ContinuousClock.now + Self.confirmationPatience)) {
                case .committed:
                    if let value = outcome.value { return value }
                    throw StateWriteError(description: error.description)
                case .aborted:
                    continue
                case .inProgress, .unknown:
                    throw StateWriteError(description: "PostgreSQL did not acknowledge a commit, and whether it was made could not be learnt")
                }
            }
        }
        throw StateWriteError(description: "PostgreSQL did not acknowledge a commit, three times")
    }

    /// How long a commit whose acknowledgement was lost is looked up before the change is given
    /// up as unknown.
    static let confirmationPatience = Duration.seconds(10)

    /// What became of `transaction`, asked on a new connection until `deadline`: a COMMIT still in
    /// progress is waited for, a database out of reach is asked again.
    private func commitStatus(of transaction: Int64, until deadline: ContinuousClock.Instant) async -> PostgresConnection.CommitStatus {
        while true {
            if let status = try? await run("read", { connection throws(PostgresError) in try connection.commitStatus(of: transaction) }),
               status != .inProgress {
                return status
            }
            guard ContinuousClock.now < deadline else { return .unknown }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }

    // MARK: StateStore: sessions

    func readSession<T: Sendable>(_ id: SHA256Digest, now: Double, _ body: (borrowing Session) -> T) -> T? {
        cache.read(id, now: now, body)
    }

    func noteUse(_ id: SHA256Digest, now: Double) {
        cache.noteUse(id, now: now)
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
        let found: Session?
        do {
            found = try session(in: rows, 0, id: id, keyColumn: 1, sealedColumn: 2, usedAtColumn: 3)
        } catch {
            throw StateReadError(description: error.description)
        }
        guard let version = rows.count == 1 ? rows.int(0, 0) : nil, let session = found, lifetimes.isLive(session, now: now) else { return nil }
        cache.insert(session, version: version, since: generation)
        return session
    }
}

/// What one attempt of a transaction returned before its commit, kept for when the commit's
/// acknowledgement is lost and the commit is then found made.
private final class AttemptOutcome<T: Sendable>: Sendable {
    private let kept = Mutex<T?>(nil)

    func keep(_ value: T) { kept.withLock { $0 = value } }

    var value: T? { kept.withLock { $0 } }
}
