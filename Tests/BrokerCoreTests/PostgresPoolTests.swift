import Postgres
import Testing

/// The connection pool (Sources/Postgres/PostgresPool.swift) against a real PostgreSQL.
@Suite(.serialized)
struct PostgresPoolTests {
    /// A call that left its connection inside a transaction (a rollback that failed) does not
    /// hand it on: the next call's statements would run in that transaction, under its
    /// `SET LOCAL`s, and be committed or lost with it.
    @Test func aConnectionLeftInATransactionIsNotHandedOut() async throws {
        let url = try PostgresTestCluster.shared.get().createDatabase()
        let pool = PostgresPool(options: .init(url: url, password: PostgresTestCluster.password), size: 1, acquireTimeout: .seconds(5))
        defer { pool.close() }
        let leaked = try await pool.withConnection { connection throws(PostgresError) in
            try connection.execute("BEGIN")
            try connection.execute("SET LOCAL synchronous_commit = off")
            return try connection.execute("SELECT pg_backend_pid()").int(0, 0)
        }
        let next = try await pool.withConnection { connection throws(PostgresError) in
            (try connection.execute("SELECT pg_backend_pid()").int(0, 0), try connection.execute("SHOW synchronous_commit").string(0, 0))
        }
        #expect(next.0 != leaked, "a new connection")
        #expect(next.1 == "on")
    }
}
