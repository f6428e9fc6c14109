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
        if let failure = outage.reason { return failure }
        return listener.isListening ? nil : "the session notification connection to PostgreSQL is down"
    }

    /// Ends what expired — sessions past their lifetimes, handoff codes never redeemed, device
    /// codes never collected — with their revocations queued in the same transaction, and deletes
    /// expired logins, leases, tokens and sign-outs, and handoff and device codes past the replay
    /// memory; when no other instance is sweeping at the moment. Rows sealed under a key this
    /// instance lacks are left to an instance that has it. At most ``sweepBatch`` sessions at a time.
    @discardableResult func sweep() async -> [EndedGrant] {
        let now = clock()
        let replayMemory = Self.replayMemory
        let swept: Transition<Void>
        do {
            swept = try await step(now: now) { connection throws(PostgresError) -> ((), [GrantEffect]) in
                guard try connection.execute("SELECT pg_try_advisory_xact_lock($1)", [.int(Self.sweepLockKey)]).bool(0, 0) == true else {
                    return ((), [])
                }
                var parameters = SQLParameters()
                let nowParameter = parameters(.double(now))
                let keys = self.sealer.keyIDs.map { parameters(.int($0)) }.joined(separator: ", ")
                let values = parameters.values
                // Locked as they are chosen: a session whose use another instance is writing back
                // (its expiry pushed out) is skipped, and read again by the next sweep.
                let expired = try connection.execute("""
                    SELECT id FROM broker_sessions WHERE expires_at <= \(nowParameter) AND key_id IN (\(keys))
                    ORDER BY expires_at LIMIT \(Self.sweepBatch) FOR UPDATE SKIP LOCKED
                    """, values)
                var effects = (0..<expired.count).compactMap { expired.bytes($0, 0).flatMap(SHA256Digest.init(bytes:)) }
                    .map { GrantEffect.endSession($0, .expired) }
                let handoffs = try connection.execute("""
                    SELECT code, key_id, sealed FROM broker_handoffs WHERE holds_grant AND expires_at <= \(nowParameter) AND key_id IN (\(keys))
                    FOR UPDATE SKIP LOCKED
                    """, values)
                for row in 0..<handoffs.count {
                    guard let code = handoffs.bytes(row, 0).flatMap(SHA256Digest.init(bytes:)) else { continue }
                    guard case .handoff(_, var handoff)? = try self.opened(handoffs, row, table: "handoffs", key: code, keyColumn: 1, sealedColumn: 2)
                    else {
                        try connection.execute("UPDATE broker_handoffs SET holds_grant = false WHERE code = $1", [.bytes(code.bytes)])
                        continue
                    }
                    effects += handoff.expire(at: now)
                    var update = SQLParameters()
                    let set = try self.handoffColumns(code, handoff).map { "\($0.0) = \(update($0.1))" }.joined(separator: ", ")
                    try connection.execute("UPDATE broker_handoffs SET \(set) WHERE code = \(update(.bytes(code.bytes)))", update.values)
                }
                // Device codes, like handoff codes, are kept for the replay memory past their expiry,
                // so that a late poll is told `expired_token`. An expired row left `pending` no
                // longer reserves its user code: nobody can act on it any more, so a new code may
                // draw it (``issueDeviceCode(_:_:)`` clears the mark then), and
                // ``pendingDeviceCode(userCode:now:)`` does not find it.
                let devices = try connection.execute("""
                    SELECT code, key_id, sealed, poll_interval, polled_at FROM broker_device_codes
                    WHERE holds_grant AND expires_at <= \(nowParameter) AND key_id IN (\(keys))
                    FOR UPDATE SKIP LOCKED
                    """, values)
                for row in 0..<devices.count {
                    guard let code = devices.bytes(row, 0).flatMap(SHA256Digest.init(bytes:)) else { continue }
                    guard var device = try self.device(in: devices, row, code: code, columns: (1, 2, 3, 4)) else {
                        try connection.execute("UPDATE broker_device_codes SET holds_grant = false WHERE code = $1", [.bytes(code.bytes)])
                        continue
                    }
                    effects += device.expire(at: now)
                    var update = SQLParameters()
                    let set = try self.deviceColumns(code, device).map { "\($0.0) = \(update($0.1))" }.joined(separator: ", ")
                    try connection.execute("UPDATE broker_device_codes SET \(set) WHERE code = \(update(.bytes(code.bytes)))", update.values)
                }
                try connection.execute("DELETE FROM broker_logins WHERE expires_at <= $1", [.double(now)])
                try connection.execute("DELETE FROM broker_handoffs WHERE expires_at + $2 <= $1 AND NOT holds_grant", [.double(now), .double(replayMemory)])
                try connection.execute("DELETE FROM broker_device_codes WHERE expires_at + $2 <= $1 AND NOT holds_grant", [.double(now), .double(replayMemory)])
                try connection.execute("DELETE FROM broker_refresh_leases WHERE held_until <= extract(epoch FROM clock_timestamp())")
                try connection.execute("DELETE FROM broker_spent_tokens WHERE expires_at <= $1", [.double(now)])
                try connection.execute("DELETE FROM broker_sign_outs WHERE expires_at <= $1", [.double(now)])
                return ((), effects)
            }
        } catch {
            logger.warning("the sweep could not run; expired rows wait for the next", metadata: ["reason": "\(error.description)"])
            return []
        }
        let sessionsEnded = swept.ended.filter { if case .session = $0.holder { true } else { false } }.count
        if sessionsEnded > 0 { logger.info("expired sessions ended", metadata: ["count": .stringConvertible(sessionsEnded)]) }
        await countSessions()
        return swept.ended
    }

    /// Sessions a sweep ends at most (the next sweep takes the rest).
    static let sweepBatch = 1000

    /// Every second: the sessions' `used_at` the cache queued, and the gauges; every 30 s: a sweep, the count of
    /// live sessions, and rows sealed under an older key re-sealed under the current one.
    func maintain(ended: @escaping @Sendable ([EndedGrant]) async -> Void) async {
        var lastSweep = ContinuousClock.now
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(1))
            // While the database is out of reach (a call failed, or the notification connection
            // dropped), a probe each second tells when it is back without waiting for a client's
            // call — and logs the outage's start, if no call has yet.
            if outage.reason != nil || !listener.isListening {
                _ = try? await run { connection throws(PostgresError) in try connection.execute("SELECT 1") }
            }
            await flushUse()
            metrics?.stateStoreInUse(cachedSessions: cache.count, callsInFlight: pool.callsInFlight + lockPool.callsInFlight)
            if ContinuousClock.now - lastSweep >= .seconds(30) {
                await ended(await sweep())
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
            _ = try? await updateSession(id, under: nil) { _ in }
        }
    }
}
