import BrokerCrypto
import Postgres
import Synchronization

/// Session rows: made, changed (compare-and-set on their version), ended with their revocation
/// queued, and imported. Every change to a row bumps its version and notifies `id:version` on
/// ``channel`` in the same transaction, so every instance's cache drops what it held.
extension PostgresStateStore {
    /// The session in `row` (``opened(_:_:table:key:keyColumn:sealedColumn:)``), its use as late
    /// as its `used_at` column says when given.
    func session(in rows: PostgresRows, _ row: Int, id: SHA256Digest, keyColumn: Int, sealedColumn: Int, usedAtColumn: Int?) throws(PostgresError) -> Session? {
        guard rows.count > row,
              case .session(var session)? = try opened(rows, row, table: "sessions", key: id, keyColumn: keyColumn, sealedColumn: sealedColumn)
        else { return nil }
        if let column = usedAtColumn, let usedAt = rows.double(row, column) { session.usedAt = max(session.usedAt, usedAt) }
        return session
    }

    /// Inserts `session`'s row (version 1) on `connection`, unless `ifAbsent` finds one with its
    /// id; whether it was inserted.
    @discardableResult
    func insert(_ session: Session, on connection: PostgresConnection, ifAbsent: Bool = false) throws(PostgresError) -> Bool {
        var parameters = SQLParameters()
        let index = indexValues(provider: session.provider, subject: session.subject, providerSessionID: session.providerSessionID)
        let columns: [(String, PostgresValue)] = [
            ("id", .bytes(session.id.bytes)), ("version", .int(1)), ("key_id", .int(sealer.currentKeyID)),
            ("sealed", .bytes(try sealed(.session(session), table: "sessions", key: session.id))),
            ("provider", .text(session.provider)), ("app", .text(session.app)), ("created_at", .double(session.createdAt)),
            ("used_at", .double(session.usedAt)), ("expires_at", .double(lifetimes.end(of: session))),
            ("subject_index", index.subject), ("sid_index", index.sid),
        ]
        let values = columns.map { parameters($0.1) }
        return try connection.execute("""
            INSERT INTO broker_sessions (\(columns.map(\.0).joined(separator: ", "))) VALUES (\(values.joined(separator: ", ")))
            \(ifAbsent ? "ON CONFLICT (id) DO NOTHING" : "")
            """, parameters.values).affected == 1
    }

    /// Removes session `id`'s row on `connection` and notifies every instance; the session it
    /// held (expired or not: its tokens are to be revoked either way), nil when there was none (or
    /// it did not open). A row sealed under a key this instance lacks throws, and stays: removed
    /// here, its grant could not be revoked.
    func deleteSession(_ id: SHA256Digest, on connection: PostgresConnection) throws(PostgresError) -> Session? {
        let rows = try connection.execute("SELECT key_id, sealed FROM broker_sessions WHERE id = $1 FOR UPDATE", [.bytes(id.bytes)])
        guard rows.count == 1 else { return nil }
        let found = try session(in: rows, 0, id: id, keyColumn: 0, sealedColumn: 1, usedAtColumn: nil)
        try connection.execute("DELETE FROM broker_sessions WHERE id = $1", [.bytes(id.bytes)])
        try connection.execute("SELECT pg_notify($1, $2)", [.text(Self.channel), .text(notification(id, .max))])
        return found
    }

    func updateSession(_ id: SHA256Digest, under lease: RefreshLease?, _ change: (inout Session) -> Void) async throws(StateWriteError) -> Session? {
        try await updating.withLock(id) { () async throws(StateWriteError) -> Session? in try await compareAndSet(id, under: lease?.held, change) }
    }

    /// Compare-and-set on the row version: a concurrent change from another instance makes the
    /// write miss, and the change is applied again to what that change left. A connection lost
    /// on the way is retried for a few seconds — and, for the refresh that holds the session's
    /// `lease`, for as long as the lease holds and a minute more: the tokens the provider has just
    /// rotated are then the only ones that work, so giving up sooner would lose the session (a
    /// restart or failover of PostgreSQL can outlast the lease). No other instance refreshes the
    /// session while the lease holds; past it, the write is made only while no other instance
    /// holds a lease on the session (one that took it would refresh with the token this one
    /// replaced).
    private func compareAndSet(_ id: SHA256Digest, under lease: RefreshLease.Held?, _ change: (inout Session) -> Void) async throws(StateWriteError) -> Session? {
        for attempt in 0..<32 {
            if attempt > 0 { try? await Task.sleep(for: .milliseconds(Int.random(in: 1...(5 * attempt)))) }
            let now = clock()
            let rows: PostgresRows
            let opened: Session?
            do {
                rows = try await run(patience: Self.patience(under: lease)) { connection throws(PostgresError) in
                    try connection.execute("SELECT version, key_id, sealed, used_at FROM broker_sessions WHERE id = $1 AND expires_at > $2",
                                           [.bytes(id.bytes), .double(now)])
                }
                opened = try session(in: rows, 0, id: id, keyColumn: 1, sealedColumn: 2, usedAtColumn: 3)
            } catch {
                throw StateWriteError(description: error.description)
            }
            guard let version = rows.count == 1 ? rows.int(0, 0) : nil, var session = opened else { return nil }
            change(&session)
            let changed = session
            let began = cache.currentGeneration
            let written = try await write(patience: Self.patience(under: lease)) { connection throws(PostgresError) -> Bool in
                try self.replace(changed, version: version, under: lease, on: connection)
            }
            if written {
                cache.insert(session, version: version + 1, since: began, written: true)
                return session
            }
        }
        throw StateWriteError(description: "the session changed too often to update")
    }

    /// Writes `session` over its row at `version` on `connection` and notifies every instance;
    /// false when the row has moved on (or, under `lease`, another instance holds a live lease).
    private func replace(_ session: Session, version: Int64, under lease: RefreshLease.Held?, on connection: PostgresConnection) throws(PostgresError) -> Bool {
        try lease?.lockRow(of: session.id, on: connection)
        var parameters = SQLParameters()
        let id = parameters(.bytes(session.id.bytes))
        let index = indexValues(provider: session.provider, subject: session.subject, providerSessionID: session.providerSessionID)
        let updated = try connection.execute("""
            UPDATE broker_sessions SET version = \(parameters(.int(version + 1))), key_id = \(parameters(.int(sealer.currentKeyID))),
                sealed = \(parameters(.bytes(try sealed(.session(session), table: "sessions", key: session.id)))),
                used_at = greatest(used_at, \(parameters(.double(session.usedAt)))),
                expires_at = greatest(expires_at, \(parameters(.double(lifetimes.end(of: session))))),
                subject_index = \(parameters(index.subject)), sid_index = \(parameters(index.sid))
            WHERE id = \(id) AND version = \(parameters(.int(version)))\(lease?.noOtherLiveLease(on: id, &parameters) ?? "")
            """, parameters.values)
        guard updated.affected == 1 else { return false }
        try connection.execute("SELECT pg_notify($1, $2)", [.text(Self.channel), .text(notification(session.id, version + 1))])
        return true
    }

    func endSession(_ id: SHA256Digest, _ reason: EndReason, now: Double) async throws(StateWriteError) -> EndedGrant? {
        try await step(now: now) { _ throws(PostgresError) in ((), [.endSession(id, reason)]) }.ended.first
    }

    /// Stores sessions copied from elsewhere (`state import`) in one transaction, each unless
    /// one with its id is there: how many were stored.
    func importSessions(_ sessions: [Session]) async throws(StateWriteError) -> Int {
        let began = cache.currentGeneration
        let stored = try await write { connection throws(PostgresError) -> [Session] in
            var stored: [Session] = []
            for session in sessions where try self.insert(session, on: connection, ifAbsent: true) { stored.append(session) }
            return stored
        }
        for session in stored { cache.insert(session, version: 1, since: began, written: true) }
        liveSessions.wrappingAdd(stored.count, ordering: .relaxed)
        return stored.count
    }
}
