import BrokerCrypto

/// The asymmetric JWS algorithms (RFC 7518 §3, RFC 8037) an ID token may be signed with: the
/// ones libcrypto checks for the broker (``VerificationKey/Algorithm``).
///
/// There is deliberately no case for `none` or for the HMAC family: an HMAC token "verified"
/// with a provider's public key bytes as the secret is the classic JWT forgery, so those names
/// are not even representable here.
typealias SignatureAlgorithm = VerificationKey.Algorithm

extension VerificationKey.Algorithm {
    /// What the broker signs its client assertions with (`token_endpoint_auth_signing_alg`).
    static let clientAssertion: [SignatureAlgorithm] = [.rs256, .ps256, .es256]

    /// The kind of key (JWK `kty`, and `crv` where it matters) that can check this algorithm.
    var keyFamily: KeyFamily {
        switch self {
        case .rs256, .rs384, .rs512, .ps256, .ps384, .ps512: .rsa
        case .es256: .ellipticCurve("P-256")
        case .es384: .ellipticCurve("P-384")
        case .es512: .ellipticCurve("P-521")
        case .edDSA: .octetKeyPair("Ed25519")
        }
    }

    /// The algorithm used to try a key's material when the key set names none for it; any
    /// algorithm of the family builds the same key.
    static func representative(of family: KeyFamily) -> SignatureAlgorithm? {
        allCases.first { $0.keyFamily == family }
    }
}

/// A public key's type as a JWK states it: `kty`, plus `crv` for elliptic-curve and octet keys.
enum KeyFamily: Sendable, Equatable {
    case rsa
    case ellipticCurve(String)
    case octetKeyPair(String)

    /// The family of a JWK's `kty` and `crv`, or nil for a key that cannot check a signature
    /// this verifier accepts (`oct`, an unknown type or curve).
    init?(kty: String, crv: String?) {
        switch (kty, crv) {
        case ("RSA", _): self = .rsa
        case ("EC", let curve?) where ["P-256", "P-384", "P-521"].contains(curve): self = .ellipticCurve(curve)
        case ("OKP", "Ed25519"): self = .octetKeyPair("Ed25519")
        default: return nil
        }
    }
}
