import BrokerCrypto
import Postgres

/// Device codes (RFC 8628) in PostgreSQL: one row each, sealed like a handoff code; a decision or
/// a poll changes it under a row lock and commits with its effects, so that one instance wins.
/// Polls that only record their time commit without waiting for the disk; one that collects the
/// grant waits.
extension PostgresStateStore {
    func issueDeviceCode(_ code: SHA256Digest, _ device: DeviceAuthorization) async throws(StateWriteError) -> Bool {
        let now = clock()
        return try await write { connection throws(PostgresError) -> Bool in
            // An expired code still marked pending must not keep its user code from being drawn again.
            try connection.execute("UPDATE broker_device_codes SET pending = false WHERE user_code = $1 AND pending AND expires_at <= $2",
                                   [.bytes(device.userCode.bytes), .double(now)])
            var parameters = SQLParameters()
            let columns = try self.deviceColumns(code, device) + [
                ("code", .bytes(code.bytes)), ("user_code", .bytes(device.userCode.bytes)), ("expires_at", .double(device.expiresAt)),
                ("poll_interval", .double(device.interval)),
            ]
            let values = columns.map { parameters($0.1) }
            return try connection.execute("""
                INSERT INTO broker_device_codes (\(columns.map(\.0).joined(separator: ", "))) VALUES (\(values.joined(separator: ", ")))
                ON CONFLICT DO NOTHING
                """, parameters.values).affected == 1
        }
    }

    func pendingDeviceCode(userCode: SHA256Digest, now: Double) async throws(StateReadError) -> (code: SHA256Digest, device: DeviceAuthorization)? {
        do {
            return try await run { connection throws(PostgresError) -> (code: SHA256Digest, device: DeviceAuthorization)? in
                let rows = try connection.execute("""
                    SELECT code, key_id, sealed, poll_interval, polled_at FROM broker_device_codes
                    WHERE user_code = $1 AND pending AND expires_at > $2
                    """, [.bytes(userCode.bytes), .double(now)])
                guard rows.count == 1, let code = rows.bytes(0, 0).flatMap(SHA256Digest.init(bytes:)),
                      let device = try self.device(in: rows, 0, code: code, columns: (1, 2, 3, 4)), device.isPending(at: now) else { return nil }
                return (code, device)
            }
        } catch {
            throw StateReadError(description: error.description)
        }
    }

    func deviceCode(_ code: SHA256Digest, now: Double) async throws(StateReadError) -> DeviceAuthorization? {
        do {
            return try await run { connection throws(PostgresError) -> DeviceAuthorization? in
                let rows = try connection.execute(
                    "SELECT key_id, sealed, poll_interval, polled_at FROM broker_device_codes WHERE code = $1 AND expires_at > $2",
                    [.bytes(code.bytes), .double(now)])
                guard rows.count == 1 else { return nil }
                return try self.device(in: rows, 0, code: code, columns: (0, 1, 2, 3))
            }
        } catch {
            throw StateReadError(description: error.description)
        }
    }

    func decideDeviceCode(_ code: SHA256Digest, _ decision: DeviceDecision, now: Double) async throws(StateWriteError) -> Transition<DeviceAuthorization.Status?> {
        try await change(code, now: now, absent: nil) { device in device.decide(decision, at: now) }
    }

    func pollDeviceCode(_ code: SHA256Digest, app: String, session: SHA256Digest, keyThumbprint: String?, now: Double) async throws(StateWriteError) -> Transition<DevicePoll> {
        try await change(code, now: now, absent: .unknown) { device in device.poll(by: app, at: now, session: session, keyThumbprint: keyThumbprint) }
    }

    /// Applies `body` to the device code under a row lock and writes what changed: the sealed
    /// record when the status moved (waiting for the disk), else the interval and poll time; and
    /// `body`'s effects in the same transaction.
    private func change<T: Sendable>(
        _ code: SHA256Digest, now: Double, absent: T, _ body: @escaping @Sendable (inout DeviceAuthorization) -> (T, [GrantEffect])
    ) async throws(StateWriteError) -> Transition<T> {
        try await step(now: now) { connection throws(PostgresError) -> (T, [GrantEffect]) in
            let rows = try connection.execute(
                "SELECT key_id, sealed, poll_interval, polled_at FROM broker_device_codes WHERE code = $1 FOR UPDATE", [.bytes(code.bytes)])
            guard rows.count == 1, var device = try self.device(in: rows, 0, code: code, columns: (0, 1, 2, 3)) else { return (absent, []) }
            let before = device.status.step
            let (answer, effects) = body(&device)
            var parameters = SQLParameters()
            var assignments = [("poll_interval", PostgresValue.double(device.interval)),
                               ("polled_at", device.lastPolledAt.map { .double($0) } ?? .null)]
            if device.status.step != before {
                assignments += try self.deviceColumns(code, device)
            } else {
                try connection.execute("SET LOCAL synchronous_commit = off")
            }
            let set = assignments.map { "\($0.0) = \(parameters($0.1))" }.joined(separator: ", ")
            try connection.execute("UPDATE broker_device_codes SET \(set) WHERE code = \(parameters(.bytes(code.bytes)))", parameters.values)
            return (answer, effects)
        }
    }

    /// The columns of `device`'s row that follow its status (the interval and the poll time are
    /// columns of their own).
    func deviceColumns(_ code: SHA256Digest, _ device: DeviceAuthorization) throws(PostgresError) -> [(String, PostgresValue)] {
        let pending = if case .pending = device.status { true } else { false }
        return try [
            ("pending", .text(pending ? "true" : "false")), ("key_id", .int(sealer.currentKeyID)),
            ("sealed", .bytes(sealed(.device(code, device), table: "device_codes", key: code))),
        ] + heldGrantColumns(device.uncollectedGrant)
    }

    /// The device code in `row`: its sealed record with the interval and poll time of its columns
    /// (key id, sealed, interval, polled at).
    func device(in rows: PostgresRows, _ row: Int, code: SHA256Digest, columns: (Int, Int, Int, Int)) throws(PostgresError) -> DeviceAuthorization? {
        guard case .device(_, var device)? = try opened(rows, row, table: "device_codes", key: code, keyColumn: columns.0, sealedColumn: columns.1)
        else { return nil }
        device.interval = rows.double(row, columns.2) ?? device.interval
        device.lastPolledAt = rows.double(row, columns.3)
        return device
    }
}
