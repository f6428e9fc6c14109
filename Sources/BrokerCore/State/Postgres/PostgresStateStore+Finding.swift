import BrokerCrypto
import Postgres

/// Finding sessions by what they hold (the admin API, back-channel logout), and tokens accepted
/// once across instances.
extension PostgresStateStore {
    /// Rows are chosen by their plain columns (`provider`, `app`) and blind index
    /// (``BlindIndex``: under every configured key), then opened and matched exactly: a row not
    /// yet indexed (written before the index existed, until re-sealing reaches it) is opened too.
    func findSessions(_ filter: SessionFilter, after: SHA256Digest?, limit: Int, now: Double) async throws(StateReadError) -> SessionPage {
        var conditions = ["expires_at > $1"]
        var values: [PostgresValue] = [.double(now)]
        func parameter(_ value: PostgresValue) -> String {
            values.append(value)
            return "$\(values.count)"
        }
        if let provider = filter.provider { conditions.append("provider = \(parameter(.text(provider)))") }
        if let app = filter.app { conditions.append("app = \(parameter(.text(app)))") }
        if let provider = filter.provider {
            for (column, kind, value) in [("subject_index", BlindIndex.Kind.subject, filter.subject),
                                          ("sid_index", .providerSession, filter.providerSessionID)] {
                guard let value else { continue }
                let candidates = index.candidates(kind, provider: provider, value).map { parameter(.bytes($0)) }
                conditions.append("(\(column) IN (\(candidates.joined(separator: ", "))) OR subject_index IS NULL)")
            }
        }
        let cursorParameter = parameter(after.map { .bytes($0.bytes) } ?? .null)
        conditions.append("(\(cursorParameter)::bytea IS NULL OR id > \(cursorParameter))")
        let statement = "SELECT id, key_id, sealed, used_at FROM broker_sessions WHERE \(conditions.joined(separator: " AND ")) ORDER BY id LIMIT \(limit + 1)"
        let cursorIndex = values.count - 1
        var found: [Session] = []
        var cursor = after
        while true {
            var batch = values
            batch[cursorIndex] = cursor.map { .bytes($0.bytes) } ?? .null
            let arguments = batch
            let rows: PostgresRows
            do {
                rows = try await run { connection throws(PostgresError) in try connection.execute(statement, arguments) }
            } catch {
                throw StateReadError(description: error.description)
            }
            for row in 0..<rows.count {
                guard let bytes = rows.bytes(row, 0), let id = SHA256Digest(bytes: bytes) else { continue }
                cursor = id
                let opened: Session?
                do {
                    opened = try session(in: rows, row, id: id, keyColumn: 1, sealedColumn: 2, usedAtColumn: 3)
                } catch {
                    throw StateReadError(description: error.description)
                }
                guard let session = opened,
                      lifetimes.isLive(session, now: now), filter.matches(session) else { continue }
                found.append(session)
                if found.count > limit { return SessionPage(sessions: Array(found.prefix(limit)), next: found[limit - 1].id) }
            }
            if rows.count <= limit { return SessionPage(sessions: found, next: nil) }
        }
    }

    func spendOnce(_ id: SHA256Digest, until: Double) async throws(StateWriteError) -> Bool {
        let now = clock()
        return try await write { connection throws(PostgresError) -> Bool in
            try connection.execute("DELETE FROM broker_spent_tokens WHERE id = $1 AND expires_at <= $2", [.bytes(id.bytes), .double(now)])
            return try connection.execute("INSERT INTO broker_spent_tokens (id, expires_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
                                          [.bytes(id.bytes), .double(until)]).affected == 1
        }
    }

    func isSpent(_ id: SHA256Digest, now: Double) async throws(StateReadError) -> Bool {
        do {
            return try await run { connection throws(PostgresError) in
                try connection.execute("SELECT 1 FROM broker_spent_tokens WHERE id = $1 AND expires_at > $2", [.bytes(id.bytes), .double(now)])
            }.count == 1
        } catch {
            throw StateReadError(description: error.description)
        }
    }
}
