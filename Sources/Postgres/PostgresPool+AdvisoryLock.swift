import Dispatch

extension PostgresPool {
    /// Runs `body` while holding PostgreSQL's transaction-level advisory lock `key`, taken on one
    /// of this pool's connections and held there (its thread waits) until `body` returns. Other
    /// holders of `key`, in any process, wait for it; if this process or its connection dies,
    /// the server ends the transaction and the lock goes with it. Waiting for the lock takes at
    /// most `waitSeconds` (then `.query` with SQLSTATE 57014).
    public func withAdvisoryLock<T: Sendable>(_ key: Int64, waitSeconds: Int, _ body: () async -> T) async throws(PostgresError) -> T {
        let locked = OneShot<PostgresError?>()
        let release = DispatchSemaphore(value: 0)
        let holder = Task { () -> Void in
            do throws(PostgresError) {
                try await withConnection { connection throws(PostgresError) in
                    try connection.execute("BEGIN")
                    do throws(PostgresError) {
                        try connection.execute("SET LOCAL statement_timeout = \(max(1, waitSeconds) * 1000)")
                        try connection.execute("SELECT pg_advisory_xact_lock($1)", [.int(key)])
                    } catch {
                        if connection.isHealthy { _ = try? connection.execute("ROLLBACK") }
                        throw error
                    }
                    locked.fulfill(nil)
                    release.wait()
                    // Ends the transaction, and with it the lock.
                    _ = try? connection.execute("COMMIT")
                }
            } catch {
                locked.fulfill(error)
            }
        }
        if let failure = await locked.value {
            await holder.value
            throw failure
        }
        let value = await body()
        release.signal()
        await holder.value
        return value
    }
}
