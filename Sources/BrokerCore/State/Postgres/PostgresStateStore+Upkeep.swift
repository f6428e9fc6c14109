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

    /// Deletes expired rows, when no other instance is sweeping at the moment; the grants of
    /// device codes that expired uncollected.
    @discardableResult func sweep() async -> [Grant] {
        let now = clock()
        let replayMemory = Self.replayMemory
        let swept = try? await write { connection throws(PostgresError) -> (sessions: Int, devices: PostgresRows?) in
            guard try connection.execute("SELECT pg_try_advisory_xact_lock($1)", [.int(Self.sweepLockKey)]).bool(0, 0) == true else {
                return (0, nil)
            }
            let sessions = try connection.execute("DELETE FROM broker_sessions WHERE expires_at <= $1", [.double(now)]).affected
            try connection.execute("DELETE FROM broker_logins WHERE expires_at <= $1", [.double(now)])
            try connection.execute("DELETE FROM broker_handoffs WHERE expires_at + $2 <= $1", [.double(now), .double(replayMemory)])
            let devices = try connection.execute("DELETE FROM broker_device_codes WHERE expires_at <= $1 RETURNING code, key_id, sealed", [.double(now)])
            try connection.execute("DELETE FROM broker_refresh_leases WHERE held_until <= extract(epoch FROM clock_timestamp())")
            try connection.execute("DELETE FROM broker_spent_tokens WHERE expires_at <= $1", [.double(now)])
            return (sessions, devices)
        }
        if let removed = swept?.sessions, removed > 0 { logger.info("expired sessions removed", metadata: ["count": "\(removed)"]) }
        await countSessions()
        guard let devices = swept?.devices else { return [] }
        return (0..<devices.count).compactMap { row in
            guard let code = devices.bytes(row, 0).flatMap(SHA256Digest.init(bytes:)), let keyID = devices.int(row, 1),
                  let sealed = devices.bytes(row, 2), case .device(_, let device) = sealer.open(sealed, keyID: keyID, table: "device_codes", key: code)
            else { return nil }
            return device.uncollectedGrant
        }
    }

    /// Every second: the sessions' `used_at` the cache queued, and the gauges; every 30 s: a sweep, the count of
    /// live sessions, and rows sealed under an older key re-sealed under the current one.
    func maintain(abandoned: @escaping @Sendable ([Grant]) async -> Void) async {
        var lastSweep = ContinuousClock.now
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(1))
            await flushUse()
            metrics?.stateStoreInUse(cachedSessions: cache.count, callsInFlight: pool.callsInFlight + lockPool.callsInFlight)
            if ContinuousClock.now - lastSweep >= .seconds(30) {
                await abandoned(await sweep())
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

    /// Writes when sessions were last used (as the cache queues them: ``SessionCache``) and
    /// pushes their expiry out accordingly, a thousand rows a statement.
    func flushUse() async {
        let used = cache.takeUsed()
        guard !used.isEmpty else { return }
        let idle = lifetimes.idle
        let absolute = lifetimes.absolute
        for start in stride(from: 0, to: used.count, by: 1000) {
            let batch = used[start..<min(start + 1000, used.count)]
            let ids = batch.map(\.0.hex).joined(separator: ",")
            let times = batch.map { "\($0.1)" }.joined(separator: ",")
            do {
                _ = try await write { connection throws(PostgresError) in
                    try connection.execute("""
                        UPDATE broker_sessions AS s
                        SET used_at = greatest(s.used_at, u.used_at::float8),
                            expires_at = least(s.created_at + $4, greatest(s.used_at, u.used_at::float8) + $3)
                        FROM unnest(string_to_array($1, ','), string_to_array($2, ',')) AS u(id, used_at)
                        WHERE s.id = decode(u.id, 'hex')
                        """, [.text(ids), .text(times), .double(idle), .double(absolute)])
                }
            } catch {
                // Not written (the database out of reach): written with the next batch, so that
                // the sweep does not take a session in use for an idle one.
                cache.requeueUsed(batch)
            }
        }
    }

    /// Re-seals up to 2,000 session rows sealed under an older key or written before the blind
    /// index, through `updateSession` (a version bump like any change), which indexes them under
    /// the current key. From a random id on (then from the start): instances re-seal different
    /// rows at once, and rows that cannot be opened do not hold up the rest.
    func reseal() async {
        let current = sealer.currentKeyID
        let from = SecureRandom.bytes(count: 32)
        guard let ids = try? await run("read", { connection throws(PostgresError) -> [SHA256Digest] in
            let stale = "(key_id <> $1 OR subject_index IS NULL)"
            var rows = [try connection.execute("SELECT id FROM broker_sessions WHERE \(stale) AND id >= $2 ORDER BY id LIMIT 2000",
                                                [.int(current), .bytes(from)])]
            if rows[0].count < 2000 {
                rows.append(try connection.execute("SELECT id FROM broker_sessions WHERE \(stale) AND id < $2 ORDER BY id LIMIT $3",
                                                   [.int(current), .bytes(from), .int(Int64(2000 - rows[0].count))]))
            }
            return rows.flatMap { found in (0..<found.count).compactMap { found.bytes($0, 0).flatMap(SHA256Digest.init(bytes:)) } }
        }) else { return }
        for id in ids {
            _ = try? await updateSession(id) { _ in }
        }
    }
}
