import CryptoShim

/// A key read from PEM text through libcrypto: RSA of 2048 bits or more, or EC P-256; private
/// (it signs: RS256 or PS256, ES256) or public (it is only published). What the broker signs its
/// client assertions with (`private_key_jwt`). It never prints its material.
public final class PEMKey: Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case rsa
        case ecP256
    }

    /// The algorithms a PEM key signs with.
    public enum Algorithm: String, Sendable, CaseIterable {
        case rs256 = "RS256"
        case ps256 = "PS256"
        case es256 = "ES256"

        var shimValue: Int32 {
            switch self {
            case .rs256: TB_CRYPTO_RS256
            case .ps256: TB_CRYPTO_PS256
            case .es256: TB_CRYPTO_ES256
            }
        }
    }

    public let kind: Kind
    public let isPrivate: Bool
    /// libcrypto's `EVP_PKEY`, owned; read-only once built.
    private nonisolated(unsafe) let key: UnsafeMutableRawPointer

    /// The key in `pem`: a private key (PKCS#8 `PRIVATE KEY`, `RSA PRIVATE KEY`, `EC PRIVATE
    /// KEY`, unencrypted), or when `publicAllowed` a public one (`PUBLIC KEY`). Nil for anything
    /// else, an encrypted key, an RSA key under 2048 bits or another curve.
    public init?(pem: String, publicAllowed: Bool) {
        var kind: Int32 = 0
        var isPrivate: Int32 = 0
        let built = Array(pem.utf8).withUnsafeBytes { text -> UnsafeMutableRawPointer? in
            guard let base = text.baseAddress else { return nil }
            return tb_crypto_pem_key_new(base, text.count, publicAllowed ? 1 : 0, &kind, &isPrivate)
        }
        guard let built else { return nil }
        key = built
        self.kind = kind == TB_CRYPTO_KEY_RSA ? .rsa : .ecP256
        self.isPrivate = isPrivate == 1
    }

    deinit {
        tb_crypto_public_key_free(key)
    }

    /// The public key's members, big-endian, as a JWK writes them (base64url): `n` and `e` for
    /// RSA, `x` and `y` for EC. Nil when libcrypto cannot give them.
    public var publicMembers: (first: [UInt8], second: [UInt8])? {
        var first = [UInt8](repeating: 0, count: 1024), second = [UInt8](repeating: 0, count: 32)
        var firstCount = 0, secondCount = 0
        guard tb_crypto_pem_key_public_members(key, &first, &firstCount, &second, &secondCount) == 1 else { return nil }
        return (Array(first.prefix(firstCount)), Array(second.prefix(secondCount)))
    }

    /// The JWS signature of `data` (R || S for ES256).
    public func sign(_ data: some StringProtocol, _ algorithm: Algorithm) throws(CryptoError) -> [UInt8] {
        var signature = [UInt8](repeating: 0, count: 1024)
        var count = 0
        let signed = data.withUTF8Bytes { data in
            tb_crypto_private_key_sign(key, algorithm.shimValue, data.baseAddress, data.count, &signature, &count)
        }
        guard isPrivate, signed == 1 else { throw .libraryFailure }
        return Array(signature.prefix(count))
    }

    public var description: String { "PEMKey(\(kind), \(isPrivate ? "private" : "public"))" }
}
