import BrokerCrypto
import Foundation
import Logging
import Postgres
import Synchronization

/// The PostgreSQL store's counts, health and upkeep: sweeping (one instance at a time), `used_at`
/// flushes, re-sealing under the current key, closing.
extension PostgresStateStore {
    var sessionCount: Int { liveSessions.load(ordering: .relaxed) }

    var writeFailure: String? {
        if let failure = lastFailure.withLock({ $0 }) { return failure }
        return listener.isListening ? nil : "the session notification connection to PostgreSQL is down"
    }

    /// Deletes expired rows, when no other instance is sweeping at the moment.
    func sweep() async {
        let now = clock()
        let replayMemory = FlowStore.replayMemory
        let removed = try? await write { connection throws(PostgresError) -> Int in
            guard try connection.execute("SELECT pg_try_advisory_xact_lock($1)", [.int(Self.sweepLockKey)]).bool(0, 0) == true else { return 0 }
            let sessions = try connection.execute("DELETE FROM broker_sessions WHERE expires_at <= $1", [.double(now)]).affected
            try connection.execute("DELETE FROM broker_logins WHERE expires_at <= $1", [.double(now)])
            try connection.execute("DELETE FROM broker_handoffs WHERE expires_at + $2 <= $1", [.double(now), .double(replayMemory)])
            return sessions
        }
        if let removed, removed > 0 { logger.info("expired sessions removed", metadata: ["count": "\(removed)"]) }
        await countSessions()
    }

    /// Every second: the sessions' `used_at` moved in memory; every 30 s: a sweep, the count of
    /// live sessions, and rows sealed under an older key re-sealed under the current one.
    func maintain() async {
        var lastSweep = ContinuousClock.now
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(1))
            await flushUse()
            if ContinuousClock.now - lastSweep >= .seconds(30) {
                await sweep()
                await reseal()
                lastSweep = ContinuousClock.now
            }
        }
    }

    func close() async {
        await flushUse()
        listener.stop()
        pool.close()
        lockPool.close()
    }

    func countSessions() async {
        let now = clock()
        if let count = try? await run("read", { connection throws(PostgresError) in
            try connection.execute("SELECT count(*) FROM broker_sessions WHERE expires_at > $1", [.double(now)]).int(0, 0)
        }) {
            liveSessions.store(Int(count), ordering: .relaxed)
        }
    }

    /// Writes when sessions were last used (at most once a minute each, as the cache marks them)
    /// and pushes their expiry out accordingly.
    private func flushUse() async {
        let touched = cache.takeTouched()
        guard !touched.isEmpty else { return }
        let idle = lifetimes.idle
        let absolute = lifetimes.absolute
        _ = try? await write { connection throws(PostgresError) in
            for (id, usedAt) in touched {
                try connection.execute("""
                    UPDATE broker_sessions SET used_at = greatest(used_at, $2), expires_at = least(created_at + $4, greatest(used_at, $2) + $3)
                    WHERE id = $1
                    """, [.bytes(id.bytes), .double(usedAt), .double(idle), .double(absolute)])
            }
        }
    }

    /// Re-seals up to 500 session rows sealed under an older key, through `updateSession` (a
    /// version bump like any change).
    private func reseal() async {
        let current = sealer.currentKeyID
        guard let rows = try? await run("read", { connection throws(PostgresError) in
            try connection.execute("SELECT id FROM broker_sessions WHERE key_id <> $1 LIMIT 500", [.int(current)])
        }) else { return }
        for row in 0..<rows.count {
            guard let bytes = rows.bytes(row, 0), let id = SHA256Digest(bytes: bytes) else { continue }
            _ = try? await updateSession(id) { _ in }
        }
    }
}
