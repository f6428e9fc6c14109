import BrokerCrypto
import Foundation
import JWTKit
import WireValues

/// The development provider's signing key: a fresh P-256 key per process (ES256), published as
/// a JWKS so that the broker verifies its ID tokens exactly as it verifies any provider's.
struct DevelopmentSigner: Sendable {
    private let keys: JWTKeyCollection
    private let kid: String
    /// `{"keys": [the public key]}`.
    let jwks: String

    static func make() async -> DevelopmentSigner {
        let key = ES256PrivateKey()
        let kid = "dev-" + Base64URL.encode(SecureRandom.bytes(count: 6))
        let keys = await JWTKeyCollection().add(ecdsa: key, kid: JWKIdentifier(string: kid))
        let x = key.parameters?.x ?? ""
        let y = key.parameters?.y ?? ""
        let jwks = #"{"keys":[{"kty":"EC","crv":"P-256","use":"sig","alg":"ES256","kid":"\#(kid)","x":"\#(x)","y":"\#(y)"}]}"#
        return DevelopmentSigner(keys: keys, kid: kid, jwks: jwks)
    }

    /// A signed ID token.
    func sign(_ claims: DevelopmentIDToken) async throws -> String {
        try await keys.sign(claims, kid: JWKIdentifier(string: kid))
    }

    /// A JWT of any claims (a logout token), with a `typ` header when given.
    func sign(claims: JSONValue, type: String? = nil) async throws -> String {
        var header = JWTHeader()
        if let type { header.typ = type }
        return try await keys.sign(SignedPayload(claims), kid: JWKIdentifier(string: kid), header: header)
    }
}

/// The claims of a development ID token (OpenID Connect Core §2).
struct DevelopmentIDToken: JWTPayload {
    let iss: String
    let sub: String
    let aud: String
    let exp: Int
    let iat: Int
    /// When the user signed in (the form was posted): a sign-out compares its time with this.
    let auth_time: Int
    let nonce: String?
    let name: String
    let email: String
    let email_verified: Bool

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
