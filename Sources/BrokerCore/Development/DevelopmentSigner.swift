import BrokerCrypto
import WireValues

/// The development provider's signing key: a fresh P-256 key per process (ES256), published as
/// a JWKS so that the broker verifies its ID tokens exactly as it verifies any provider's.
struct DevelopmentSigner: Sendable {
    private let key: ProofSigningKey
    private let kid: String
    /// `{"keys": [the public key]}`.
    let jwks: String

    static func make() throws(CryptoError) -> DevelopmentSigner {
        let key = try ProofSigningKey.generate()
        let kid = "dev-" + Base64URL.encode(SecureRandom.bytes(count: 6))
        let jwks = #"{"keys":[{"kty":"EC","crv":"P-256","use":"sig","alg":"ES256","kid":"\#(kid)","x":"\#(key.x)","y":"\#(key.y)"}]}"#
        return DevelopmentSigner(key: key, kid: kid, jwks: jwks)
    }

    /// A signed ID token.
    func sign(_ token: DevelopmentIDToken) throws(CryptoError) -> String {
        try sign(claims: token.claims)
    }

    /// A JWT of any claims (a logout token), its `typ` header `type` when given, else `JWT`.
    func sign(claims: JSONValue, type: String? = nil) throws(CryptoError) -> String {
        let header = JSONValue.object([("alg", .string("ES256")), ("kid", .string(kid)), ("typ", .string(type ?? "JWT"))])
        return try CompactJWS.make(header: header, claims: claims) { input throws(CryptoError) in try key.sign(input) }
    }
}

/// The claims of a development ID token (OpenID Connect Core §2).
struct DevelopmentIDToken: Sendable {
    let iss: String
    let sub: String
    let aud: String
    let exp: Int
    let iat: Int
    /// When the user signed in (the form was posted): a sign-out compares its time with this.
    let authTime: Int
    let nonce: String?
    let name: String
    let email: String
    let emailVerified: Bool

    var claims: JSONValue {
        var members: [(String, JSONValue)] = [
            ("iss", .string(iss)), ("sub", .string(sub)), ("aud", .string(aud)), ("exp", .int(exp)), ("iat", .int(iat)),
            ("auth_time", .int(authTime)),
        ]
        if let nonce { members.append(("nonce", .string(nonce))) }
        members += [("name", .string(name)), ("email", .string(email)), ("email_verified", .bool(emailVerified))]
        return .object(members)
    }
}
