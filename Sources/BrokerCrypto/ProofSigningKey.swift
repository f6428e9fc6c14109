import CryptoShim

/// A P-256 key the broker signs with (ES256): the key a grant's DPoP proofs (RFC 9449) are made
/// with towards a provider that binds its tokens to one. Made at the sign-in, kept as its 96
/// bytes (the private scalar, then the public point's `x` and `y`) and sealed with the grant.
/// It never prints itself.
public struct ProofSigningKey: Sendable, Equatable, CustomStringConvertible, CustomReflectable {
    /// The private scalar (32 bytes), then `x` and `y` (32 each).
    public let bytes: [UInt8]

    /// The key of `bytes` (as ``bytes`` writes them), or nil when they are not 96 bytes.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 96 else { return nil }
        self.bytes = bytes
    }

    /// A new key from libcrypto's generator.
    public static func generate() throws(CryptoError) -> ProofSigningKey {
        var privateKey = [UInt8](repeating: 0, count: 32)
        var point = [UInt8](repeating: 0, count: 64)
        guard tb_crypto_p256_generate(&privateKey, &point) == 1 else { throw .libraryFailure }
        defer { privateKey.withUnsafeMutableBytes { tb_crypto_cleanse($0.baseAddress, $0.count) } }
        return ProofSigningKey(bytes: privateKey + point)!
    }

    /// The public key's members as a JWK writes them (RFC 7518 §6.2.1): base64url `x` and `y`.
    public var x: String { Base64URL.encode(Array(bytes[32..<64])) }
    public var y: String { Base64URL.encode(Array(bytes[64..<96])) }

    /// The ES256 signature of `data`: R || S, 64 bytes, as JWS writes it.
    public func sign(_ data: some StringProtocol) throws(CryptoError) -> [UInt8] {
        var signature = [UInt8](repeating: 0, count: 64)
        let signed = data.withUTF8Bytes { data in
            bytes.withUnsafeBytes { key in
                tb_crypto_p256_sign(key.baseAddress!, key.baseAddress! + 32, data.baseAddress, data.count, &signature)
            }
        }
        guard signed == 1 else { throw .libraryFailure }
        return signature
    }

    public var description: String { "ProofSigningKey(<redacted>)" }
    public var customMirror: Mirror { Mirror(self, children: []) }
}
