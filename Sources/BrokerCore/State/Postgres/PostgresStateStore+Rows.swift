import BrokerCrypto
import Logging
import Postgres

/// Sealed rows, the one rule every table follows (``StateStore``): a row sealed under a key this
/// instance lacks fails the call (a 503 to retry, the key id logged) — never "absent", which
/// would end a session for its client or take a login for a stale link; a row that does not open
/// under a key it has (altered outside the broker) is logged and treated as absent.
extension PostgresStateStore {
    /// The record in `row` of a table, sealed in its `sealedColumn` under the key its
    /// `keyColumn` names; nil when the row does not open.
    func opened(_ rows: PostgresRows, _ row: Int, table: String, key: SHA256Digest, keyColumn: Int, sealedColumn: Int) throws(PostgresError) -> StateRecord? {
        guard let keyID = rows.int(row, keyColumn), let sealed = rows.bytes(row, sealedColumn) else { return nil }
        switch sealer.open(sealed, keyID: keyID, table: table, key: key) {
        case .record(let record):
            return record
        case .keyNotHere:
            logger.error("a row is sealed under a state key this instance does not have", metadata: [
                "table": "\(table)", "key_id": "\(UInt64(bitPattern: keyID))",
            ])
            throw .abandoned("a \(table) row is sealed under a state key this instance does not have")
        case .doesNotOpen:
            logger.error("a row does not open with the configured state keys; it is treated as absent", metadata: ["table": "\(table)"])
            return nil
        }
    }

    /// `record` sealed for `table` under `key` with the current state key.
    func sealed(_ record: StateRecord, table: String, key: SHA256Digest) throws(PostgresError) -> [UInt8] {
        do {
            return try sealer.seal(record, table: table, key: key)
        } catch {
            throw .abandoned("cannot seal a \(table) row: \(error)")
        }
    }

    /// The `subject_index` and `sid_index` of a row holding `provider`'s user `subject`, signed in
    /// with provider session `providerSessionID` (``BlindIndex``).
    func indexValues(provider: String, subject: String, providerSessionID: String?) -> (subject: PostgresValue, sid: PostgresValue) {
        (.bytes(index.value(.subject, provider: provider, subject)),
         providerSessionID.map { .bytes(index.value(.providerSession, provider: provider, $0)) } ?? .null)
    }
}

/// A statement's parameters, each numbered as it is added: the text names a value by the `$n`
/// adding it returned, so that a column added or moved cannot shift the others.
struct SQLParameters {
    private(set) var values: [PostgresValue] = []

    /// `value` as the next parameter: its placeholder.
    mutating func callAsFunction(_ value: PostgresValue) -> String {
        values.append(value)
        return "$\(values.count)"
    }
}
