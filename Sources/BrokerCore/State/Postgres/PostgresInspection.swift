import Foundation
import Postgres

/// `token-broker state inspect` for the PostgreSQL store: the schema version, rows by table,
/// sessions by provider and app, and by the key that sealed them, without changing anything
/// and never showing a token. Rows sealed under a key that is not configured cannot be opened:
/// they are named, and the command fails.
public enum PostgresInspection {
    public static func describe(_ config: BrokerConfig) async throws(PostgresMaintenance.Failure) -> String {
        guard let url = config.state.postgres.url else { throw PostgresMaintenance.Failure(description: "state.postgres.url is not set") }
        guard let keys = config.state.keys else {
            throw PostgresMaintenance.Failure(description: "no state key is configured (\(config.state.keySource)); the rows cannot be read")
        }
        let pool = PostgresPool(
            options: PostgresConnection.Options(url: url, password: config.state.postgres.password?.reveal(),
                                                statementTimeoutSeconds: config.state.postgres.statementTimeoutSeconds),
            size: 1, acquireTimeout: .seconds(30)
        )
        defer { pool.close() }
        let now = Date().timeIntervalSince1970
        let result: [PostgresRows]
        do {
            result = try await pool.withConnection { connection throws(PostgresError) in
                guard try connection.execute("SELECT to_regclass('broker_schema') IS NOT NULL").bool(0, 0) == true else { return [] }
                return [
                    try connection.execute("SELECT coalesce(max(version), 0), max(applied_at)::text FROM broker_schema"),
                    try connection.execute("""
                        SELECT count(*) FILTER (WHERE expires_at > $1), count(*) FILTER (WHERE expires_at <= $1) FROM broker_sessions
                        """, [.double(now)]),
                    try connection.execute("SELECT provider, app, count(*) FROM broker_sessions WHERE expires_at > $1 GROUP BY 1, 2 ORDER BY 1, 2",
                                           [.double(now)]),
                    // Every sealed row: a key is removed once none is under it (a queued revocation
                    // is sealed again under the current key at its next attempt, within the hour).
                    try connection.execute("""
                        SELECT key_id, sum(n) FROM (\(try Self.sealedTables(on: connection)
                            .map { "SELECT key_id, count(*) AS n FROM \($0) GROUP BY 1" }.joined(separator: " UNION ALL "))) AS k
                        GROUP BY 1 ORDER BY 2 DESC
                        """),
                    try connection.execute("SELECT count(*) FILTER (WHERE expires_at > $1), count(*) FROM broker_logins", [.double(now)]),
                    try connection.execute("SELECT count(*) FILTER (WHERE NOT redeemed AND expires_at > $1), count(*) FROM broker_handoffs",
                                           [.double(now)]),
                    try connection.execute("""
                        SELECT pg_size_pretty(sum(pg_total_relation_size(c))::bigint)
                        FROM unnest(ARRAY['broker_sessions', 'broker_logins', 'broker_handoffs']::regclass[]) AS c
                        """),
                    // Device codes came with schema version 3: an older database has none.
                    try connection.execute("SELECT to_regclass('broker_device_codes') IS NOT NULL").bool(0, 0) == true
                        ? try connection.execute("SELECT count(*) FILTER (WHERE pending AND expires_at > $1), count(*) FROM broker_device_codes",
                                                 [.double(now)])
                        : try connection.execute("SELECT 0, 0"),
                ]
            }
        } catch {
            throw PostgresMaintenance.Failure(description: error.description)
        }
        guard result.count == 8 else {
            throw PostgresMaintenance.Failure(description: "the database has no broker schema yet: run token-broker state migrate, or start a broker")
        }
        let (schema, sessions, byApp, byKey, logins, handoffs, size) = (result[0], result[1], result[2], result[3], result[4], result[5], result[6])
        let devices = result[7]
        let version = Int(schema.int(0, 0) ?? 0)
        var lines = [
            "database: \(url)",
            "schema version \(version) (applied \(schema.string(0, 1) ?? "?")); this broker knows \(PostgresSchema.latest)",
            "keys: \(keys.ids.count) configured, current \(StateKeys.hex(id: keys.currentID))",
            "sessions: \(sessions.int(0, 0) ?? 0) live, \(sessions.int(0, 1) ?? 0) expired (removed at the next sweep)",
        ]
        for row in 0..<byApp.count {
            lines.append("  provider \(byApp.string(row, 0) ?? "?"), app \(byApp.string(row, 1) ?? "?"): \(byApp.int(row, 2) ?? 0)")
        }
        lines.append("logins in progress: \(logins.int(0, 0) ?? 0) (\(logins.int(0, 1) ?? 0) rows)")
        lines.append("handoff codes: \(handoffs.int(0, 0) ?? 0) waiting to be redeemed (\(handoffs.int(0, 1) ?? 0) rows)")
        lines.append("device codes: \(devices.int(0, 0) ?? 0) waiting for their user (\(devices.int(0, 1) ?? 0) rows)")
        var unknownKeys: [String] = []
        for row in 0..<byKey.count {
            guard let id = byKey.int(row, 0) else { continue }
            let hex = StateKeys.hex(id: UInt64(bitPattern: id))
            let known = keys.key(id: UInt64(bitPattern: id)) != nil
            if !known { unknownKeys.append(hex) }
            let role = UInt64(bitPattern: id) == keys.currentID ? "current" : known ? "older, re-sealed in the background" : "NOT CONFIGURED"
            lines.append("rows sealed under key \(hex): \(byKey.int(row, 1) ?? 0) (\(role))")
        }
        lines.append("size on disk (tables and indexes): \(size.string(0, 0) ?? "?")")
        if version > PostgresSchema.latest { lines.append("the schema is newer than this broker: it would refuse to start") }
        guard unknownKeys.isEmpty else {
            lines.append("rows under \(unknownKeys.joined(separator: ", ")) do not open with the configured keys: add that key to BROKER_STATE_KEY (after the current one)")
            throw PostgresMaintenance.Failure(description: lines.joined(separator: "\n"))
        }
        return lines.joined(separator: "\n")
    }

    /// The tables whose rows are sealed under a state key, of those this database has (device
    /// codes came with schema version 3, revocations with 5).
    private static func sealedTables(on connection: PostgresConnection) throws(PostgresError) -> [String] {
        var tables: [String] = []
        for table in ["broker_sessions", "broker_logins", "broker_handoffs", "broker_device_codes", "broker_revocations"]
        where try connection.execute("SELECT to_regclass($1) IS NOT NULL", [.text(table)]).bool(0, 0) == true {
            tables.append(table)
        }
        return tables
    }
}
