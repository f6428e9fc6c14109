import BrokerCrypto
import WireValues

/// The public key a DPoP proof carries in its `jwk` header (RFC 9449 §4.2), built to check
/// signatures, and its JWK thumbprint (RFC 7638): what a bound token is bound to, `cnf.jkt` in
/// introspection.
struct ProofKey: Sendable {
    let key: VerificationKey
    let thumbprint: String

    /// The key in `jwk` for a proof signed with `algorithm`; refused when the JWK is no public key
    /// of the algorithm's type, has private members, or cannot be built.
    init(_ jwk: JSONValue, algorithm: VerificationKey.Algorithm) throws(DPoPProofError) {
        do throws(PublicJWK.Refusal) {
            let built = try PublicJWK(jwk, algorithm: algorithm)
            key = built.key
            thumbprint = built.thumbprint
        } catch {
            switch error {
            case .notAnObject: throw .malformed("the jwk header is not a JSON object")
            case .privateMember(let member): throw .privateKey(member)
            case .wrongType: throw .keyMismatch(algorithm.rawValue)
            case .badMember(let name): throw .malformed("the jwk header has no valid \(name)")
            case .unusable: throw .unusableKey
            }
        }
    }
}
