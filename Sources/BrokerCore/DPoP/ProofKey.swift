import BrokerCrypto
import WireValues

/// The public key a DPoP proof carries in its `jwk` header (RFC 9449 §4.2), and its JWK
/// thumbprint (RFC 7638): what a bound token is bound to, `cnf.jkt` in introspection.
struct ProofKey: Sendable {
    /// The key's members as `SignatureCheck` takes them: `x`/`y`, `n`/`e`, or `x` alone.
    let first: [UInt8]
    let second: [UInt8]
    /// The algorithm the proof names, which this key fits.
    let algorithm: SignatureCheck.Algorithm
    /// The RFC 7638 thumbprint: SHA-256 of the key's required members in lexicographic order,
    /// base64url.
    let thumbprint: String

    /// Members that only a private or symmetric key has: a proof carrying one is refused, since
    /// its signer has published the key that should prove possession.
    private static let privateMembers = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"]

    /// The key in `jwk` for a proof signed with `algorithm`; refused when the JWK is no public key
    /// of the algorithm's type, or has private members.
    init(_ jwk: JSONValue, algorithm: SignatureCheck.Algorithm) throws(DPoPProofError) {
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
        switch algorithm {
        case .es256, .es384:
            let curve = algorithm == .es256 ? "P-256" : "P-384"
            guard kty == "EC", jwk["crv"]?.stringValue == curve else { throw .keyMismatch(algorithm.rawValue) }
            let x = try member("x"), y = try member("y")
            (first, second) = (x.bytes, y.bytes)
            canonical = [("crv", .string(curve)), ("kty", .string("EC")), ("x", .string(x.text)), ("y", .string(y.text))]
        case .rs256, .ps256:
            guard kty == "RSA" else { throw .keyMismatch(algorithm.rawValue) }
            let n = try member("n"), e = try member("e")
            (first, second) = (n.bytes, e.bytes)
            canonical = [("e", .string(e.text)), ("kty", .string("RSA")), ("n", .string(n.text))]
        case .edDSA:
            guard kty == "OKP", jwk["crv"]?.stringValue == "Ed25519" else { throw .keyMismatch(algorithm.rawValue) }
            let x = try member("x")
            (first, second) = (x.bytes, [])
            canonical = [("crv", .string("Ed25519")), ("kty", .string("OKP")), ("x", .string(x.text))]
        }
        self.algorithm = algorithm
        thumbprint = Base64URL.encode(SHA256.hash(JSONValue.object(canonical).serialized()).bytes)
    }

    /// Whether `signature` signs `signingInput` with this key.
    func signed(_ signingInput: Substring, signature: [UInt8]) -> Bool {
        SignatureCheck.isValid(algorithm, first: first, second: second, data: signingInput, signature: signature)
    }
}
