import BrokerCrypto

/// Seals a row's record (a session, a login in progress, a handoff code, in the state files'
/// record encoding) with AES-256-GCM under the current state key, so that the database never
/// holds a token in the clear. The row's table and key (a SHA-256 hash) are authenticated with
/// it: a sealed value copied into another row does not open. Each row names its key id, so that
/// rows sealed under an older key still open and are re-sealed under the current one.
struct RowSealer: Sendable {
    let keys: StateKeys

    /// The current key's id as the `key_id` column holds it.
    var currentKeyID: Int64 { Int64(bitPattern: keys.currentID) }

    func seal(_ record: StateRecord, table: String, key: SHA256Digest) throws(CryptoError) -> [UInt8] {
        var plaintext: [UInt8] = []
        record.encode(into: &plaintext)
        return try AESGCM.seal(plaintext, key: keys.current, authenticating: Self.additionalData(table, key)).combined
    }

    /// The `key_id` of every key configured here.
    var keyIDs: [Int64] { keys.ids.map { Int64(bitPattern: $0) } }

    /// Whether the key `keyID` names is configured here (a row sealed by an instance that has a
    /// key this one lacks: a rotation under way).
    func hasKey(_ keyID: Int64) -> Bool {
        keys.key(id: UInt64(bitPattern: keyID)) != nil
    }

    /// What a sealed value holds: its one record, or why it cannot be had here.
    enum Opened: Sendable {
        case record(StateRecord)
        /// Sealed under a state key this instance does not have (another instance already has
        /// the next key of a rotation).
        case keyNotHere
        /// It does not open under the key it names, or holds no record (altered outside the broker).
        case doesNotOpen
    }

    func open(_ sealed: [UInt8], keyID: Int64, table: String, key: SHA256Digest) -> Opened {
        guard let secret = keys.key(id: UInt64(bitPattern: keyID)) else { return .keyNotHere }
        guard let box = try? AESGCM.SealedBox(combined: sealed),
              let plaintext = try? AESGCM.open(box, key: secret, authenticating: Self.additionalData(table, key)) else { return .doesNotOpen }
        var scopes = ScopeTable()
        var found: StateRecord?
        do {
            try StateRecord.decodeAll(plaintext[...], scopes: &scopes) { found = found == nil ? $0 : found }
        } catch {
            return .doesNotOpen
        }
        return found.map { .record($0) } ?? .doesNotOpen
    }

    private static func additionalData(_ table: String, _ key: SHA256Digest) -> [UInt8] {
        Array("token-broker/postgres/1/\(table)/".utf8) + key.bytes
    }
}
