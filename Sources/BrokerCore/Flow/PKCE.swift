import BrokerCrypto

/// Proof Key for Code Exchange (RFC 7636), S256 only, on both legs: the app proves itself to
/// the broker, and the broker to the provider.
enum PKCE {
    /// A verifier of 256 random bits: 43 characters.
    static func makeVerifier() -> String {
        Base64URL.encode(SecureRandom.bytes(count: 32))
    }

    /// `BASE64URL(SHA256(verifier))` (RFC 7636 §4.2).
    static func challenge(for verifier: String) -> String {
        SHA256.hash(verifier).withUnsafeBytes { Base64URL.encode($0) }
    }

    /// 43 to 128 characters of `[A-Za-z0-9._~-]` (RFC 7636 §4.1), for verifiers and S256
    /// challenges alike.
    static func isWellFormed(_ value: String) -> Bool {
        (43...128).contains(value.utf8.count) && value.utf8.allSatisfy(isUnreserved)
    }

    /// Whether `verifier` hashes to `challenge`, compared in constant time.
    static func verify(verifier: String, challenge: String) -> Bool {
        isWellFormed(verifier) && constantTimeEquals(Self.challenge(for: verifier), challenge)
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }
}
