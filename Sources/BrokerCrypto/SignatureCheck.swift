import CryptoShim

/// Checks a JWS signature (RFC 7515) with a public key given by its JWK members, through
/// libcrypto: what a DPoP proof (RFC 9449) is checked with, on the request path, synchronously.
public enum SignatureCheck: Sendable {
    /// The asymmetric JWS algorithms a proof may use.
    public enum Algorithm: String, Sendable, CaseIterable {
        case es256 = "ES256"
        case es384 = "ES384"
        case rs256 = "RS256"
        case ps256 = "PS256"
        case edDSA = "EdDSA"

        var shimValue: Int32 {
            switch self {
            case .es256: TB_CRYPTO_ES256
            case .es384: TB_CRYPTO_ES384
            case .rs256: TB_CRYPTO_RS256
            case .ps256: TB_CRYPTO_PS256
            case .edDSA: TB_CRYPTO_ED25519
            }
        }
    }

    /// Whether `signature` signs `data` under `algorithm` with the key whose members are
    /// `first` and `second`: `x` and `y` for ES256/ES384, `n` and `e` for RS256/PS256, `x` and
    /// nothing for EdDSA (Ed25519). False as well for a key libcrypto cannot build.
    public static func isValid(_ algorithm: Algorithm, first: [UInt8], second: [UInt8], data: some StringProtocol, signature: [UInt8]) -> Bool {
        data.withUTF8Bytes { data in
            first.withUnsafeBytes { first in
                second.withUnsafeBytes { second in
                    signature.withUnsafeBytes { signature in
                        guard let firstBase = first.baseAddress, let signatureBase = signature.baseAddress else { return false }
                        return tb_crypto_verify_signature(algorithm.shimValue, firstBase, first.count, second.baseAddress, second.count,
                                                          data.baseAddress, data.count, signatureBase, signature.count) == 1
                    }
                }
            }
        }
    }
}
