import CryptoShim

/// A public key that checks JWS signatures (RFC 7515), built through libcrypto from its JWK
/// members: what a DPoP proof (RFC 9449), a resource server's assertion and a provider's ID
/// token are checked with, synchronously.
/// Built once per key and kept (a build costs a quarter of a check); safe to use from several
/// threads at once.
public final class VerificationKey: Sendable {
    /// The asymmetric JWS algorithms a key may check.
    public enum Algorithm: String, Sendable, CaseIterable {
        case es256 = "ES256"
        case es384 = "ES384"
        case es512 = "ES512"
        case rs256 = "RS256"
        case rs384 = "RS384"
        case rs512 = "RS512"
        case ps256 = "PS256"
        case ps384 = "PS384"
        case ps512 = "PS512"
        case edDSA = "EdDSA"

        var shimValue: Int32 {
            switch self {
            case .es256: TB_CRYPTO_ES256
            case .es384: TB_CRYPTO_ES384
            case .es512: TB_CRYPTO_ES512
            case .rs256: TB_CRYPTO_RS256
            case .rs384: TB_CRYPTO_RS384
            case .rs512: TB_CRYPTO_RS512
            case .ps256: TB_CRYPTO_PS256
            case .ps384: TB_CRYPTO_PS384
            case .ps512: TB_CRYPTO_PS512
            case .edDSA: TB_CRYPTO_ED25519
            }
        }
    }

    public let algorithm: Algorithm
    /// libcrypto's `EVP_PKEY`, owned; read-only once built.
    private nonisolated(unsafe) let key: UnsafeMutableRawPointer

    /// The key of `algorithm` whose members are `first` and `second`: `x` and `y` for
    /// ES256/ES384/ES512, `n` and `e` for RS* and PS*, `x` and nothing for EdDSA (Ed25519). Nil for a
    /// key libcrypto cannot build: a point off the curve, an RSA modulus under 2048 bits, a wrong
    /// length.
    public init?(_ algorithm: Algorithm, first: [UInt8], second: [UInt8]) {
        let built = first.withUnsafeBytes { first in
            second.withUnsafeBytes { second -> UnsafeMutableRawPointer? in
                guard let firstBase = first.baseAddress else { return nil }
                return tb_crypto_public_key_new(algorithm.shimValue, firstBase, first.count, second.baseAddress, second.count)
            }
        }
        guard let built else { return nil }
        self.algorithm = algorithm
        key = built
    }

    deinit {
        tb_crypto_public_key_free(key)
    }

    /// Whether `signature` signs `data` with this key.
    public func isValid(_ signature: [UInt8], of data: some StringProtocol) -> Bool {
        data.withUTF8Bytes { data in
            signature.withUnsafeBytes { signature in
                guard let signatureBase = signature.baseAddress else { return false }
                return tb_crypto_public_key_verify(key, algorithm.shimValue, data.baseAddress, data.count, signatureBase, signature.count) == 1
            }
        }
    }
}
