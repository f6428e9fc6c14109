import BrokerCrypto
import WireValues

/// The public key a DPoP proof carries in its `jwk` header (RFC 9449 §4.2), built to check
/// signatures, and its JWK thumbprint (RFC 7638): what a bound token is bound to, `cnf.jkt` in
/// introspection.
struct ProofKey: Sendable {
    let key: VerificationKey
    /// The RFC 7638 thumbprint: SHA-256 of the key's required members in lexicographic order,
    /// base64url.
    let thumbprint: String

    /// Members that only a private or symmetric key has: a proof carrying one is refused, since
    /// its signer has published the key that should prove possession.
    private static let privateMembers = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"]

    /// The key in `jwk` for a proof signed with `algorithm`; refused when the JWK is no public key
    /// of the algorithm's type, has private members, or cannot be built.
    init(_ jwk: JSONValue, algorithm: VerificationKey.Algorithm) throws(DPoPProofError) {
        guard case .object = jwk else { throw .malformed("the jwk header is not a JSON object") }
        if let member = Self.privateMembers.first(where: { jwk[$0] != nil }) {
            throw .privateKey(member)
        }
        func member(_ name: String) throws(DPoPProofError) -> (text: String, bytes: [UInt8]) {
            guard let text = jwk[name]?.stringValue, let bytes = Base64URL.decode(text), !bytes.isEmpty else {
                throw .malformed("the jwk header has no valid \(name)")
            }
            return (text, bytes)
        }
        let kty = jwk["kty"]?.stringValue
        let canonical: [(String, JSONValue)]
        let built: VerificationKey?
        switch algorithm {
        case .es256, .es384:
            let curve = algorithm == .es256 ? "P-256" : "P-384"
            guard kty == "EC", jwk["crv"]?.stringValue == curve else { throw .keyMismatch(algorithm.rawValue) }
            let x = try member("x"), y = try member("y")
            built = VerificationKey(algorithm, first: x.bytes, second: y.bytes)
            canonical = [("crv", .string(curve)), ("kty", .string("EC")), ("x", .string(x.text)), ("y", .string(y.text))]
        case .rs256, .ps256:
            guard kty == "RSA" else { throw .keyMismatch(algorithm.rawValue) }
            let n = try member("n"), e = try member("e")
            built = VerificationKey(algorithm, first: n.bytes, second: e.bytes)
            canonical = [("e", .string(e.text)), ("kty", .string("RSA")), ("n", .string(n.text))]
        case .edDSA:
            guard kty == "OKP", jwk["crv"]?.stringValue == "Ed25519" else { throw .keyMismatch(algorithm.rawValue) }
            let x = try member("x")
            built = VerificationKey(algorithm, first: x.bytes, second: [])
            canonical = [("crv", .string("Ed25519")), ("kty", .string("OKP")), ("x", .string(x.text))]
        }
        guard let built else { throw .unusableKey }
        key = built
        thumbprint = Base64URL.encode(SHA256.hash(JSONValue.object(canonical).serialized()).bytes)
    }
}
