import BrokerCrypto

/// The broker's bearer secrets: session tokens (`tbs_`), handoff codes (`tbh_`), device codes (`tbd_`) and its own
/// `state` values. Each carries 256 random bits, base64url-encoded behind a recognisable prefix
/// (so that secret scanners and people can tell what leaked). The broker keeps only their
/// SHA-256 hashes: a copy of its memory or disk does not hand out working tokens.
enum OpaqueToken {
    static let sessionPrefix = "tbs_"
    static let handoffPrefix = "tbh_"
    static let statePrefix = "tbst_"
    static let devicePrefix = "tbd_"

    /// A fresh token with `prefix`.
    static func make(prefix: String) -> String {
        prefix + Base64URL.encode(SecureRandom.bytes(count: 32))
    }

    /// The key a token is stored under.
    static func hash(_ token: some StringProtocol) -> SHA256Digest {
        SHA256.hash(token)
    }
}
