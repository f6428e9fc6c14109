import BrokerCrypto
import WireValues

/// Signs the broker's client assertions for one provider (`private_key_jwt`: RFC 7523 §2.2 and
/// §3, OpenID Connect Core §9) and publishes the keys a provider checks them with.
///
/// During a key rotation the configuration names a second key: it is published beside the
/// signing one, so a provider that caches the broker's JWKS knows the next key before the
/// switch, and still knows the previous one after it.
public struct ClientAssertionSigner: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The key that signs.
    public let signingKey: ClientAssertionKey
    /// The algorithm it signs with: RS256 or PS256 for an RSA key, ES256 for an EC key.
    let algorithm: SignatureAlgorithm
    /// The algorithm as libcrypto's key signs it.
    private let signature: PEMKey.Algorithm
    /// Published, never used to sign.
    public let secondKey: ClientAssertionKey?
    /// What `aud` names.
    public let audience: ClientAssertionAudience
    /// How long an assertion is valid: short, since it is made for one request.
    static let lifetimeSeconds = 60

    public var description: String {
        "ClientAssertionSigner(\(algorithm.rawValue), kid \(signingKey.keyID)\(secondKey.map { ", second kid \($0.keyID)" } ?? ""), aud \(audience.rawValue))"
    }
    public var debugDescription: String { description }
    /// Dumping shows no key material either.
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }

    /// The signer, or why `algorithm` (nil: the key's first, RS256 or ES256) does not go with the signing key.
    static func make(signingKey: ClientAssertionKey, algorithm: SignatureAlgorithm?, secondKey: ClientAssertionKey?,
                     audience: ClientAssertionAudience) -> Result<ClientAssertionSigner, ConfigValueError> {
        let chosen = algorithm ?? signingKey.algorithms[0]
        guard let key = signingKey.signing(chosen) else {
            return .failure(ConfigValueError("\(chosen.rawValue) does not go with an \(signingKey.family) key (use "
                + signingKey.algorithms.map(\.rawValue).joined(separator: " or ") + ")"))
        }
        return .success(ClientAssertionSigner(signingKey: signingKey, algorithm: chosen, signature: key, secondKey: secondKey, audience: audience))
    }

    /// A fresh client assertion: `iss` and `sub` the client id, `aud` the given audience, a
    /// unique `jti` (128 random bits), `iat` now and `exp` a minute later; the header names the
    /// algorithm and the signing key's `kid`.
    func assertion(clientID: String, audience: String, now: Double) throws(CryptoError) -> String {
        let issuedAt = Int(now)
        let claims = JSONValue.object([
            ("iss", .string(clientID)), ("sub", .string(clientID)), ("aud", .string(audience)),
            ("jti", .string(Base64URL.encode(SecureRandom.bytes(count: 16)))), ("iat", .int(issuedAt)), ("exp", .int(issuedAt + Self.lifetimeSeconds)),
        ])
        let header = JSONValue.object([("alg", .string(algorithm.rawValue)), ("typ", .string("JWT")), ("kid", .string(signingKey.keyID))])
        return try CompactJWS.make(header: header, claims: claims) { input throws(CryptoError) in try signingKey.material.sign(input, signature) }
    }

    /// `{"keys": [...]}`: the signing key's public JWK, then the second key's.
    var jwks: JSONValue {
        var keys = [signingKey.jwk(algorithm: algorithm)]
        if let secondKey {
            keys.append(secondKey.jwk(algorithm: secondKey.algorithms.contains(algorithm) ? algorithm : secondKey.algorithms[0]))
        }
        return .object([("keys", .array(keys))])
    }
}
