import BrokerCrypto
import WireValues

/// A public key written as a JWK (RFC 7517) for one JWS algorithm, built to check signatures
/// (``VerificationKey``), with its RFC 7638 thumbprint: the key of a DPoP proof's header, or of
/// a resource server's key set.
struct PublicJWK: Sendable {
    let key: VerificationKey
    /// SHA-256 of the key's required members in lexicographic order, base64url.
    let thumbprint: String

    /// Why a JWK is no public key for the algorithm.
    enum Refusal: Error, Sendable, Equatable {
        case notAnObject
        /// A member only a private or symmetric key has: a key that would prove nothing.
        case privateMember(String)
        /// Not the key type (and curve) the algorithm needs.
        case wrongType
        /// A required member missing or not base64url.
        case badMember(String)
        /// libcrypto cannot build it: a point off its curve, an RSA modulus under 2048 bits.
        case unusable
    }

    private static let privateMembers = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"]

    init(_ jwk: JSONValue, algorithm: VerificationKey.Algorithm) throws(Refusal) {
        guard case .object = jwk else { throw .notAnObject }
        if let member = Self.privateMembers.first(where: { jwk[$0] != nil }) { throw .privateMember(member) }
        func member(_ name: String) throws(Refusal) -> (text: String, bytes: [UInt8]) {
            guard let text = jwk[name]?.stringValue, let bytes = Base64URL.decode(text), !bytes.isEmpty else { throw .badMember(name) }
            return (text, bytes)
        }
        let kty = jwk["kty"]?.stringValue
        let canonical: [(String, JSONValue)]
        let built: VerificationKey?
        switch algorithm {
        case .es256, .es384, .es512:
            let curve = algorithm == .es256 ? "P-256" : algorithm == .es384 ? "P-384" : "P-521"
            guard kty == "EC", jwk["crv"]?.stringValue == curve else { throw .wrongType }
            let x = try member("x"), y = try member("y")
            built = VerificationKey(algorithm, first: x.bytes, second: y.bytes)
            canonical = [("crv", .string(curve)), ("kty", .string("EC")), ("x", .string(x.text)), ("y", .string(y.text))]
        case .rs256, .rs384, .rs512, .ps256, .ps384, .ps512:
            guard kty == "RSA" else { throw .wrongType }
            let n = try member("n"), e = try member("e")
            built = VerificationKey(algorithm, first: n.bytes, second: e.bytes)
            canonical = [("e", .string(e.text)), ("kty", .string("RSA")), ("n", .string(n.text))]
        case .edDSA:
            guard kty == "OKP", jwk["crv"]?.stringValue == "Ed25519" else { throw .wrongType }
            let x = try member("x")
            built = VerificationKey(algorithm, first: x.bytes, second: [])
            canonical = [("crv", .string("Ed25519")), ("kty", .string("OKP")), ("x", .string(x.text))]
        }
        guard let built else { throw .unusable }
        key = built
        thumbprint = Base64URL.encode(SHA256.hash(JSONValue.object(canonical).serialized()).bytes)
    }
}
