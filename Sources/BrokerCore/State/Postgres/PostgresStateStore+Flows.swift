import BrokerCrypto
import Foundation
import Logging
import Postgres

/// Logins in progress and handoff codes in PostgreSQL: a login is taken by one `DELETE …
/// RETURNING` and a code redeemed under a row lock, so one instance wins.
extension PostgresStateStore {
    func beginLogin(_ state: SHA256Digest, _ pending: PendingAuthorization) async throws(StateWriteError) {
        let sealed: [UInt8]
        do {
            sealed = try sealer.seal(.pending(state, pending), table: "logins", key: state)
        } catch {
            throw StateWriteError(description: "cannot seal a login: \(error)")
        }
        let keyID = sealer.currentKeyID
        try await write { connection throws(PostgresError) in
            // Visible to every instance at commit; a crash may lose it (the user signs in again).
            try connection.execute("SET LOCAL synchronous_commit = off")
            try connection.execute("INSERT INTO broker_logins (state, key_id, sealed, expires_at) VALUES ($1, $2, $3, $4)",
                                   [.bytes(state.bytes), .int(keyID), .bytes(sealed), .double(pending.expiresAt)])
        }
    }

    func takeLogin(_ state: SHA256Digest, now: Double) async throws(StateWriteError) -> PendingAuthorization? {
        let rows = try await write { connection throws(PostgresError) -> PostgresRows in
            try connection.execute("SET LOCAL synchronous_commit = off")
            return try connection.execute("DELETE FROM broker_logins WHERE state = $1 RETURNING key_id, sealed, expires_at", [.bytes(state.bytes)])
        }
        guard rows.count == 1, (rows.double(0, 2) ?? 0) > now, let keyID = rows.int(0, 0), let sealed = rows.bytes(0, 1),
              case .pending(_, let pending) = sealer.open(sealed, keyID: keyID, table: "logins", key: state) else { return nil }
        return pending
    }

    func issueHandoff(_ code: SHA256Digest, _ handoff: Handoff) async throws(StateWriteError) {
        let sealed: [UInt8]
        do {
            sealed = try sealer.seal(.handoff(code, handoff), table: "handoffs", key: code)
        } catch {
            throw StateWriteError(description: "cannot seal a handoff code: \(error)")
        }
        let keyID = sealer.currentKeyID
        let sessionID: PostgresValue = handoff.sessionID.map { .bytes($0.bytes) } ?? .null
        _ = try await write { connection throws(PostgresError) in
            try connection.execute("INSERT INTO broker_handoffs (code, key_id, sealed, expires_at, session_id) VALUES ($1, $2, $3, $4, $5)",
                                   [.bytes(code.bytes), .int(keyID), .bytes(sealed), .double(handoff.expiresAt), sessionID])
        }
    }

    func redeemHandoff(
        _ code: SHA256Digest, now: Double, check: @escaping @Sendable (Handoff) -> HandoffRefusal?
    ) async throws(StateWriteError) -> HandoffRedemption {
        let sealer = sealer
        let result = try await write { connection throws(PostgresError) -> Result<HandoffRedemption, StateWriteError> in
            let rows = try connection.execute(
                "SELECT key_id, sealed, redeemed, session_id FROM broker_handoffs WHERE code = $1 FOR UPDATE", [.bytes(code.bytes)])
            guard rows.count == 1 else { return .success(.unknown) }
            guard let keyID = rows.int(0, 0), let sealed = rows.bytes(0, 1),
                  case .handoff(_, let handoff) = sealer.open(sealed, keyID: keyID, table: "handoffs", key: code) else {
                return .failure(StateWriteError(description: "a handoff row does not open with the configured state keys"))
            }
            if rows.bool(0, 2) == true {
                if let refusal = check(handoff) { return .success(.refused(refusal)) }
                let sessionID = rows.bytes(0, 3).flatMap { SHA256Digest(bytes: $0) }
                if sessionID == nil {
                    try connection.execute("UPDATE broker_handoffs SET replayed_before_binding = true WHERE code = $1", [.bytes(code.bytes)])
                }
                return .success(.replayed(sessionID))
            }
            // Whatever happens next, the code never works again; its grant is no longer kept. One
            // refused or expired released nothing: no session is bound to it.
            let live = handoff.expiresAt > now
            let refusal = live ? check(handoff) : nil
            var spent = handoff
            spent.redeemed = true
            spent.grant = nil
            let releasedNothing = !live || refusal != nil
            if releasedNothing { spent.sessionID = nil }
            let resealed: [UInt8]
            do {
                resealed = try sealer.seal(.handoff(code, spent), table: "handoffs", key: code)
            } catch {
                return .failure(StateWriteError(description: "cannot seal a handoff code: \(error)"))
            }
            let unbind = releasedNothing ? ", session_id = NULL" : ""
            try connection.execute("UPDATE broker_handoffs SET redeemed = true, key_id = $2, sealed = $3\(unbind) WHERE code = $1",
                                   [.bytes(code.bytes), .int(sealer.currentKeyID), .bytes(resealed)])
            guard live else { return .success(.expired) }
            return .success(refusal.map { .refused($0) } ?? .fresh(handoff))
        }
        return try result.get()
    }
}
