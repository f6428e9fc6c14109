import BrokerCrypto
import Postgres

/// Device codes (RFC 8628) in PostgreSQL: one row each, sealed like a handoff code; a decision or
/// a poll changes it under a row lock, so that one instance wins. Polls that only record their
/// time commit without waiting for the disk; one that collects the grant waits.
extension PostgresStateStore {
    func issueDeviceCode(_ code: SHA256Digest, _ device: DeviceAuthorization) async throws(StateWriteError) -> Bool {
        let sealed = try seal(code, device)
        let keyID = sealer.currentKeyID
        let now = clock()
        return try await write { connection throws(PostgresError) -> Bool in
            // An expired code still marked pending must not keep its user code from being drawn again.
            try connection.execute("UPDATE broker_device_codes SET pending = false WHERE user_code = $1 AND pending AND expires_at <= $2",
                                   [.bytes(device.userCode.bytes), .double(now)])
            return try connection.execute("""
                INSERT INTO broker_device_codes (code, user_code, pending, key_id, sealed, expires_at, poll_interval)
                VALUES ($1, $2, true, $3, $4, $5, $6) ON CONFLICT DO NOTHING
                """, [.bytes(code.bytes), .bytes(device.userCode.bytes), .int(keyID), .bytes(sealed),
                      .double(device.expiresAt), .double(device.interval)]).affected == 1
        }
    }

    func pendingDeviceCode(userCode: SHA256Digest, now: Double) async throws(StateReadError) -> (code: SHA256Digest, device: DeviceAuthorization)? {
        let rows: PostgresRows
        do {
            rows = try await run { connection throws(PostgresError) in
                try connection.execute("""
                    SELECT code, key_id, sealed, poll_interval, polled_at FROM broker_device_codes
                    WHERE user_code = $1 AND pending AND expires_at > $2
                    """, [.bytes(userCode.bytes), .double(now)])
            }
        } catch {
            throw StateReadError(description: error.description)
        }
        guard rows.count == 1, let bytes = rows.bytes(0, 0), let code = SHA256Digest(bytes: bytes),
              let device = open(rows, 0, code: code, columns: (1, 2, 3, 4)), device.isPending(at: now) else { return nil }
        return (code, device)
    }

    func decideDeviceCode(_ code: SHA256Digest, _ decision: DeviceDecision, now: Double) async throws(StateWriteError) -> DeviceAuthorization.Status? {
        try await change(code) { device in device.decide(decision, at: now) }
    }

    func pollDeviceCode(_ code: SHA256Digest, app: String, now: Double) async throws(StateWriteError) -> DevicePoll {
        try await change(code) { device in device.poll(by: app, at: now) } ?? .unknown
    }

    /// Applies `body` to the device code under a row lock and writes what changed: the sealed
    /// record when the status changed (waiting for the disk), else the interval and poll time.
    /// `body`'s result, nil when there is no such row or `body` answered nil (nothing written).
    private func change<T: Sendable>(_ code: SHA256Digest, _ body: @escaping @Sendable (inout DeviceAuthorization) -> T?) async throws(StateWriteError) -> T? {
        let sealer = sealer
        let result = try await write { connection throws(PostgresError) -> Result<T?, StateWriteError> in
            let rows = try connection.execute(
                "SELECT key_id, sealed, poll_interval, polled_at FROM broker_device_codes WHERE code = $1 FOR UPDATE", [.bytes(code.bytes)])
            guard rows.count == 1 else { return .success(nil) }
            guard var device = self.open(rows, 0, code: code, columns: (0, 1, 2, 3)) else {
                return .failure(StateWriteError(description: "a device code row does not open with the configured state keys"))
            }
            let before = Self.step(device.status)
            guard let value = body(&device) else { return .success(nil) }
            let pending = if case .pending = device.status { true } else { false }
            if Self.step(device.status) != before {
                guard let sealed = try? sealer.seal(.device(code, device), table: "device_codes", key: code) else {
                    return .failure(StateWriteError(description: "cannot seal a device code"))
                }
                try connection.execute("""
                    UPDATE broker_device_codes SET pending = $2, key_id = $3, sealed = $4, poll_interval = $5, polled_at = $6 WHERE code = $1
                    """, [.bytes(code.bytes), .text(pending ? "true" : "false"), .int(sealer.currentKeyID), .bytes(sealed),
                          .double(device.interval), device.lastPolledAt.map { .double($0) } ?? .null])
            } else {
                try connection.execute("SET LOCAL synchronous_commit = off")
                try connection.execute("UPDATE broker_device_codes SET poll_interval = $2, polled_at = $3 WHERE code = $1",
                                       [.bytes(code.bytes), .double(device.interval), device.lastPolledAt.map { .double($0) } ?? .null])
            }
            return .success(value)
        }
        return try result.get()
    }

    /// Which step a status is at, to tell whether a change moved it on.
    private static func step(_ status: DeviceAuthorization.Status) -> Int {
        switch status {
        case .pending: 0
        case .approved: 1
        case .denied: 2
        case .collected: 3
        case .signedIn: 4
        }
    }

    private func seal(_ code: SHA256Digest, _ device: DeviceAuthorization) throws(StateWriteError) -> [UInt8] {
        do {
            return try sealer.seal(.device(code, device), table: "device_codes", key: code)
        } catch {
            throw StateWriteError(description: "cannot seal a device code: \(error)")
        }
    }

    /// The device code in `row`: its sealed record with the interval and poll time of its columns
    /// (key id, sealed, interval, polled at).
    private func open(_ rows: PostgresRows, _ row: Int, code: SHA256Digest, columns: (Int, Int, Int, Int)) -> DeviceAuthorization? {
        guard let keyID = rows.int(row, columns.0), let sealed = rows.bytes(row, columns.1),
              case .device(_, var device) = sealer.open(sealed, keyID: keyID, table: "device_codes", key: code) else { return nil }
        device.interval = rows.double(row, columns.2) ?? device.interval
        device.lastPolledAt = rows.double(row, columns.3)
        return device
    }
}
