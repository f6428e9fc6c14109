import BrokerCrypto
import Foundation
import Logging
import Postgres

/// Logins in progress and handoff codes in PostgreSQL: a login is taken by one transaction that
/// locks, opens and deletes its row; a code's redemption locks its row and commits with its
/// effects (``step(now:_:)``), so one instance wins.
extension PostgresStateStore {
    func beginLogin(_ state: SHA256Digest, _ pending: PendingAuthorization) async throws(StateWriteError) {
        try await write { connection throws(PostgresError) in
            // Visible to every instance at commit; a crash may lose it (the user signs in again).
            try connection.execute("SET LOCAL synchronous_commit = off")
            try connection.execute("INSERT INTO broker_logins (state, key_id, sealed, expires_at) VALUES ($1, $2, $3, $4)",
                                   [.bytes(state.bytes), .int(self.sealer.currentKeyID),
                                    .bytes(try self.sealed(.pending(state, pending), table: "logins", key: state)), .double(pending.expiresAt)])
        }
    }

    /// Opened before it is deleted: a login sealed under a key this instance lacks stays for an
    /// instance that has it (a 503 here), rather than being taken for a stale link.
    func takeLogin(_ state: SHA256Digest, now: Double) async throws(StateWriteError) -> PendingAuthorization? {
        try await write { connection throws(PostgresError) -> PendingAuthorization? in
            try connection.execute("SET LOCAL synchronous_commit = off")
            let rows = try connection.execute("SELECT key_id, sealed, expires_at FROM broker_logins WHERE state = $1 FOR UPDATE",
                                              [.bytes(state.bytes)])
            guard rows.count == 1 else { return nil }
            let record = try self.opened(rows, 0, table: "logins", key: state, keyColumn: 0, sealedColumn: 1)
            try connection.execute("DELETE FROM broker_logins WHERE state = $1", [.bytes(state.bytes)])
            guard (rows.double(0, 2) ?? 0) > now, case .pending(_, let pending)? = record else { return nil }
            return pending
        }
    }

    func issueHandoff(_ code: SHA256Digest, _ handoff: Handoff) async throws(StateWriteError) {
        try await write { connection throws(PostgresError) in
            var parameters = SQLParameters()
            let columns = try self.handoffColumns(code, handoff) + [("code", .bytes(code.bytes)), ("expires_at", .double(handoff.expiresAt))]
            let values = columns.map { parameters($0.1) }
            try connection.execute("""
                INSERT INTO broker_handoffs (\(columns.map(\.0).joined(separator: ", "))) VALUES (\(values.joined(separator: ", ")))
                """, parameters.values)
        }
    }

    func redeemHandoff(_ code: SHA256Digest, _ attempt: HandoffAttempt) async throws(StateWriteError) -> Transition<HandoffRedemption> {
        try await step(now: attempt.at) { connection throws(PostgresError) -> (HandoffRedemption, [GrantEffect]) in
            let rows = try connection.execute("SELECT key_id, sealed FROM broker_handoffs WHERE code = $1 FOR UPDATE", [.bytes(code.bytes)])
            guard rows.count == 1, case .handoff(_, var handoff)? = try self.opened(rows, 0, table: "handoffs", key: code, keyColumn: 0, sealedColumn: 1)
            else { return (.unknown, []) }
            let (redemption, effects) = handoff.redeem(attempt)
            var parameters = SQLParameters()
            let assignments = try self.handoffColumns(code, handoff).map { "\($0.0) = \(parameters($0.1))" }
            try connection.execute("UPDATE broker_handoffs SET \(assignments.joined(separator: ", ")) WHERE code = \(parameters(.bytes(code.bytes)))",
                                   parameters.values)
            return (redemption, effects)
        }
    }

    /// The columns of `handoff`'s row that follow its status: sealed, whether it holds a grant
    /// (and whose, by blind index), and — for brokers from before the status was one value — the
    /// session it stands for and whether it was redeemed.
    func handoffColumns(_ code: SHA256Digest, _ handoff: Handoff) throws(PostgresError) -> [(String, PostgresValue)] {
        let (session, redeemed): (SHA256Digest?, Bool) = switch handoff.status {
        case .holding: (nil, false)
        case .merged(let session, _, _, _): (session, false)
        case .redeemed(let session): (session, true)
        case .spent: (nil, true)
        }
        return try [
            ("key_id", .int(sealer.currentKeyID)), ("sealed", .bytes(sealed(.handoff(code, handoff), table: "handoffs", key: code))),
            ("redeemed", .text(redeemed ? "true" : "false")), ("session_id", session.map { .bytes($0.bytes) } ?? .null),
        ] + heldGrantColumns(handoff.heldGrant)
    }

    /// `holds_grant`, `subject_index` and `sid_index` of a row that holds `grant` (or none).
    func heldGrantColumns(_ grant: Grant?) -> [(String, PostgresValue)] {
        let index = grant.map { indexValues(provider: $0.provider, subject: $0.subject, providerSessionID: $0.providerSessionID) }
        return [("holds_grant", .text(grant == nil ? "false" : "true")), ("subject_index", index?.subject ?? .null), ("sid_index", index?.sid ?? .null)]
    }
}
