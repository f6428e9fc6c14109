import BrokerCrypto

/// Keyed hashes (HMAC-SHA256) of a provider's user id (`sub`) or session id (`sid`), under a
/// key derived from each state key (never a state key itself): a blind index. The PostgreSQL
/// store keeps them in plain columns beside the sealed row, so that the sessions of a subject
/// or of a provider session are found by an index lookup while the subject itself stays sealed;
/// without the state keys the column tells nothing, not even which rows share a subject across
/// providers. Values under the current key are written; lookups try every configured key, so a
/// key rotation does not hide rows until they are re-sealed (which re-indexes them).
struct BlindIndex: Sendable {
    /// The current key first.
    private let keys: [[UInt8]]

    init(stateKeys: StateKeys) {
        keys = stateKeys.all.map { key in
            key.withUnsafeBytes { HMACSHA256.authenticationCode(for: "token-broker blind index v1", key: Array($0)) }
        }
    }

    /// What is indexed.
    enum Kind: String, Sendable {
        case subject
        case providerSession = "sid"
    }

    /// The value written for `value` of `provider`, under the current key.
    func value(_ kind: Kind, provider: String, _ value: String) -> [UInt8] {
        Self.hash(kind, provider, value, key: keys[0])
    }

    /// The values a row indexed under any configured key may hold for `value` of `provider`.
    func candidates(_ kind: Kind, provider: String, _ value: String) -> [[UInt8]] {
        keys.map { Self.hash(kind, provider, value, key: $0) }
    }

    /// Provider ids are identifiers without NUL: `kind NUL provider NUL value` is unambiguous.
    private static func hash(_ kind: Kind, _ provider: String, _ value: String, key: [UInt8]) -> [UInt8] {
        HMACSHA256.authenticationCode(for: Array("\(kind.rawValue)\u{0}\(provider)\u{0}\(value)".utf8), key: key)
    }
}
