import BrokerCrypto
import Postgres
import Synchronization

/// A grant's steps in PostgreSQL: each in one transaction with its effects
/// (``step(now:_:)``), sign-outs remembered for every instance, and the revocation queue, whose
/// entries one instance at a time claims for a delivery.
extension PostgresStateStore {
    /// Runs a step in one transaction: `body` locks and rewrites its holder's row and says what
    /// the step does; its effects are carried out on the same connection, so that the step and
    /// its effects commit together. Then this instance's cache follows what committed.
    func step<T: Sendable>(
        now: Double, _ body: @escaping @Sendable (PostgresConnection) throws(PostgresError) -> (T, [GrantEffect])
    ) async throws(StateWriteError) -> Transition<T> {
        let began = cache.currentGeneration
        let transition = try await write { connection throws(PostgresError) -> Transition<T> in
            let (answer, effects) = try body(connection)
            return try self.apply(effects, answer: answer, on: connection, now: now)
        }
        if let made = transition.made {
            cache.insert(made, version: 1, since: began, written: true)
            liveSessions.wrappingAdd(1, ordering: .relaxed)
        }
        for ended in transition.ended {
            guard case .session(let id) = ended.holder else { continue }
            cache.remove(id)
            liveSessions.wrappingSubtract(1, ordering: .relaxed)
        }
        return transition
    }

    /// Carries `effects` out on `connection`, inside the step's transaction.
    private func apply<T: Sendable>(_ effects: [GrantEffect], answer: T, on connection: PostgresConnection, now: Double) throws(PostgresError) -> Transition<T> {
        var transition = Transition(answer: answer)
        for effect in effects {
            switch effect {
            case .makeSession(let session):
                try insert(session, on: connection)
                transition.made = session
            case .endSession(let id, let reason):
                guard let removed = try deleteSession(id, on: connection) else { continue }
                let (ended, queued) = EndedGrant.of(removed, reason: reason, at: now)
                try queue(queued, on: connection)
                transition.ended.append(ended)
            case .revoke(let grant, let holder, let app, let reason):
                let (ended, queued) = EndedGrant.of(grant, held: holder, app: app, reason: reason, at: now)
                try queue(queued, on: connection)
                transition.ended.append(ended)
            }
        }
        return transition
    }

    /// Adds `revocation` to the queue on `connection` (once: the same tokens queued again are the
    /// same entry).
    private func queue(_ revocation: QueuedRevocation, on connection: PostgresConnection) throws(PostgresError) {
        try connection.execute("""
            INSERT INTO broker_revocations (id, key_id, sealed, provider, due_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING
            """, [.bytes(revocation.id.bytes), .int(sealer.currentKeyID),
                  .bytes(try sealed(.revocation(revocation), table: "revocations", key: revocation.id)),
                  .text(revocation.provider), .double(revocation.dueAt)])
    }

    // MARK: Sign-outs

    /// Both tables in one transaction: what it ended is all committed, or nothing is.
    func endSignIns(_ signOut: SignOut, now: Double) async throws(StateWriteError) -> [EndedGrant] {
        try await step(now: now) { connection throws(PostgresError) -> ((), [GrantEffect]) in
            let handoffs = try self.endHeld(signOut, table: "handoffs", on: connection) { code, record throws(PostgresError) in
                guard case .handoff(_, var handoff) = record else { return nil }
                let effects = handoff.end(signOut)
                return (try self.handoffColumns(code, handoff), effects)
            }
            let devices = try self.endHeld(signOut, table: "device_codes", on: connection) { code, record throws(PostgresError) in
                guard case .device(_, var device) = record else { return nil }
                let effects = device.end(signOut)
                return (try self.deviceColumns(code, device), effects)
            }
            return ((), handoffs + devices)
        }.ended
    }

    /// The rows of `table` (handoff or device codes) holding a grant of the user `signOut` names
    /// (by its blind index, or not indexed yet), locked and opened; `end` says what each becomes
    /// (its columns) and what that does. A row that does not open holds nothing any more.
    private func endHeld(
        _ signOut: SignOut, table: String, on connection: PostgresConnection,
        _ end: (SHA256Digest, StateRecord) throws(PostgresError) -> ([(String, PostgresValue)], [GrantEffect])?
    ) throws(PostgresError) -> [GrantEffect] {
        var parameters = SQLParameters()
        var indexed: [String] = []
        for (column, kind, value) in [("subject_index", BlindIndex.Kind.subject, signOut.subject),
                                      ("sid_index", .providerSession, signOut.providerSessionID)] {
            guard let value else { continue }
            let candidates = index.candidates(kind, provider: signOut.provider, value).map { parameters(.bytes($0)) }
            indexed.append("\(column) IN (\(candidates.joined(separator: ", ")))")
        }
        let rows = try connection.execute("""
            SELECT code, key_id, sealed FROM broker_\(table)
            WHERE holds_grant AND (subject_index IS NULL OR \(indexed.joined(separator: " OR "))) FOR UPDATE
            """, parameters.values)
        var effects: [GrantEffect] = []
        for row in 0..<rows.count {
            guard let code = rows.bytes(row, 0).flatMap(SHA256Digest.init(bytes:)) else { continue }
            guard let record = try opened(rows, row, table: table, key: code, keyColumn: 1, sealedColumn: 2) else {
                try connection.execute("UPDATE broker_\(table) SET holds_grant = false WHERE code = $1", [.bytes(code.bytes)])
                continue
            }
            guard let (columns, ending) = try end(code, record), !ending.isEmpty else { continue }
            var update = SQLParameters()
            let set = columns.map { "\($0.0) = \(update($0.1))" }.joined(separator: ", ")
            try connection.execute("UPDATE broker_\(table) SET \(set) WHERE code = \(update(.bytes(code.bytes)))", update.values)
            effects += ending
        }
        return effects
    }

    func rememberSignOut(_ signOut: SignOut, until: Double) async throws(StateWriteError) {
        guard let scope = signOut.scope else { return }
        let key = index.value(Self.indexKind(scope), provider: signOut.provider, Self.indexed(scope))
        _ = try await write { connection throws(PostgresError) in
            try connection.execute("""
                INSERT INTO broker_sign_outs (id, signed_in_before, reason, expires_at) VALUES ($1, $2, $3, $4)
                ON CONFLICT (id) DO UPDATE SET
                    reason = CASE WHEN excluded.signed_in_before > broker_sign_outs.signed_in_before THEN excluded.reason ELSE broker_sign_outs.reason END,
                    signed_in_before = greatest(broker_sign_outs.signed_in_before, excluded.signed_in_before),
                    expires_at = greatest(broker_sign_outs.expires_at, excluded.expires_at)
                """, [.bytes(key), .double(signOut.signedInBefore), .text(signOut.reason.rawValue), .double(until)])
        }
    }

    func signOut(covering grant: Grant, now: Double) async throws(StateReadError) -> SignOut? {
        var parameters = SQLParameters()
        var scopes: [([UInt8], SignOut.Scope)] = []
        for scope in SignOut.scopes(covering: grant) {
            scopes += index.candidates(Self.indexKind(scope), provider: grant.provider, Self.indexed(scope)).map { ($0, scope) }
        }
        let ids = scopes.map { parameters(.bytes($0.0)) }
        let rows: PostgresRows
        do {
            rows = try await run { [parameters] connection throws(PostgresError) in
                try connection.execute("""
                    SELECT id, signed_in_before, reason, expires_at FROM broker_sign_outs WHERE id IN (\(ids.joined(separator: ", ")))
                    """, parameters.values)
            }
        } catch {
            throw StateReadError(description: error.description)
        }
        let remembered = (0..<rows.count).compactMap { row -> (RememberedSignOut, SignOut.Scope)? in
            guard let id = rows.bytes(row, 0), let scope = scopes.first(where: { $0.0 == id })?.1, let signedInBefore = rows.double(row, 1),
                  let until = rows.double(row, 3), let reason = rows.string(row, 2).flatMap(EndReason.init(rawValue:)) else { return nil }
            return (RememberedSignOut(signedInBefore: signedInBefore, reason: reason, until: until), scope)
        }
        return SignOut.covering(grant, among: remembered, now: now)
    }

    private static func indexKind(_ scope: SignOut.Scope) -> BlindIndex.Kind {
        switch scope {
        case .subject: .subject
        case .providerSession: .providerSession
        }
    }

    private static func indexed(_ scope: SignOut.Scope) -> String {
        switch scope {
        case .subject(let value), .providerSession(let value): value
        }
    }

    // MARK: Revocations

    func queueRevocation(_ grant: Grant, app: String, _ reason: EndReason, now: Double) async throws(StateWriteError) -> EndedGrant {
        let transition = try await step(now: now) { _ throws(PostgresError) in ((), [.revoke(grant, held: .none, app: app, reason)]) }
        guard let ended = transition.ended.first else { throw StateWriteError(description: "the revocation was not queued") }
        return ended
    }

    func dueRevocations(now: Double, limit: Int, claim: Double, id: SHA256Digest?) async throws(StateWriteError) -> [QueuedRevocation] {
        var parameters = SQLParameters()
        let nowParameter = parameters(.double(now))
        let keys = sealer.keyIDs.map { parameters(.int($0)) }.joined(separator: ", ")
        let which = id.map { "id = \(parameters(.bytes($0.bytes)))" } ?? "due_at <= \(nowParameter) AND claimed_until <= \(nowParameter)"
        let statement = """
            UPDATE broker_revocations SET claimed_until = \(nowParameter) + \(parameters(.double(claim)))
            WHERE id IN (SELECT id FROM broker_revocations WHERE \(which) AND key_id IN (\(keys))
                         ORDER BY due_at LIMIT \(parameters(.int(Int64(limit)))) FOR UPDATE SKIP LOCKED)
            RETURNING id, key_id, sealed
            """
        let values = parameters.values
        return try await write { connection throws(PostgresError) -> [QueuedRevocation] in
            let rows = try connection.execute(statement, values)
            var taken: [QueuedRevocation] = []
            for row in 0..<rows.count {
                guard let id = rows.bytes(row, 0).flatMap(SHA256Digest.init(bytes:)) else { continue }
                guard case .revocation(let revocation)? = try self.opened(rows, row, table: "revocations", key: id, keyColumn: 1, sealedColumn: 2) else {
                    // It does not open: nothing can be delivered of it, now or later.
                    try connection.execute("DELETE FROM broker_revocations WHERE id = $1", [.bytes(id.bytes)])
                    continue
                }
                taken.append(revocation)
            }
            return taken
        }
    }

    func settleRevocation(_ id: SHA256Digest, next: QueuedRevocation?) async throws(StateWriteError) {
        try await write { connection throws(PostgresError) in
            guard let next else {
                try connection.execute("DELETE FROM broker_revocations WHERE id = $1", [.bytes(id.bytes)])
                return
            }
            try connection.execute("UPDATE broker_revocations SET key_id = $2, sealed = $3, due_at = $4, claimed_until = 0 WHERE id = $1",
                                   [.bytes(id.bytes), .int(self.sealer.currentKeyID),
                                    .bytes(try self.sealed(.revocation(next), table: "revocations", key: id)), .double(next.dueAt)])
        }
    }

    func countRevocations() async throws(StateReadError) -> Int {
        do {
            return Int(try await run { connection throws(PostgresError) in
                try connection.execute("SELECT count(*) FROM broker_revocations").int(0, 0) ?? 0
            })
        } catch {
            throw StateReadError(description: error.description)
        }
    }

    func countPendingSignIns() async throws(StateReadError) -> Int {
        do {
            return Int(try await run { connection throws(PostgresError) in
                try connection.execute("SELECT (SELECT count(*) FROM broker_logins) + (SELECT count(*) FROM broker_device_codes)").int(0, 0) ?? 0
            })
        } catch {
            throw StateReadError(description: error.description)
        }
    }
}
