import BrokerCrypto
import Foundation
import JWTKit
import WireValues

/// A key of the broker's as a provider's client, read from a PEM file: RSA (2048 bits or more)
/// or EC P-256, private (it can sign client assertions) or public (it is only published, as the
/// second key of a rotation). Printing or dumping it shows its `kid`, never its material.
public struct ClientAssertionKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    enum Material: Sendable {
        case rsaPrivate(Insecure.RSA.PrivateKey)
        case rsaPublic(Insecure.RSA.PublicKey)
        case ecPrivate(ES256PrivateKey)
        case ecPublic(ES256PublicKey)
    }

    let material: Material
    /// Where it was read from (a file's path), for messages.
    public let source: String
    /// The JWK thumbprint of the public key (RFC 7638, SHA-256): the `kid` in the broker's JWKS
    /// and in each assertion's header. It changes with the key, so two keys never share one.
    public let keyID: String
    /// The public key's JWK members (`kty`, then `n` and `e`, or `crv`, `x` and `y`).
    let publicMembers: [(String, JSONValue)]

    public var description: String { "ClientAssertionKey(\(family), kid \(keyID), from \(source))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }

    /// `RSA` or `EC P-256`.
    /// Whether it holds a private key (else only a public one).
    var isPrivate: Bool {
        switch material {
        case .rsaPrivate, .ecPrivate: true
        case .rsaPublic, .ecPublic: false
        }
    }

    var family: String {
        switch material {
        case .rsaPrivate, .rsaPublic: "RSA"
        case .ecPrivate, .ecPublic: "EC P-256"
        }
    }

    /// The algorithms a key of this family signs with here.
    var algorithms: [SignatureAlgorithm] {
        switch material {
        case .rsaPrivate, .rsaPublic: [.rs256, .ps256]
        case .ecPrivate, .ecPublic: [.es256]
        }
    }

    /// Reads a PEM key: a private key (PKCS#8 `PRIVATE KEY`, `RSA PRIVATE KEY` or `EC PRIVATE
    /// KEY`), or, when `publicAllowed`, a public one (`PUBLIC KEY`). The message of a failure
    /// names what was expected, never the file's content.
    static func parse(pem: String, source: String, publicAllowed: Bool) -> Result<ClientAssertionKey, ConfigValueError> {
        if let key = try? Insecure.RSA.PrivateKey(pem: pem) { return make(.rsaPrivate(key), source) }
        if let key = try? ES256PrivateKey(pem: pem) { return make(.ecPrivate(key), source) }
        if publicAllowed {
            if let key = try? Insecure.RSA.PublicKey(pem: pem) { return make(.rsaPublic(key), source) }
            if let key = try? ES256PublicKey(pem: pem) { return make(.ecPublic(key), source) }
        }
        let expected = publicAllowed ? "a PEM private or public key" : "a PEM private key"
        return .failure(ConfigValueError("is not \(expected) of a supported kind: RSA of 2048 bits or more, or EC P-256 "
            + "(unencrypted; PKCS#8, PKCS#1 or SEC 1)"))
    }

    private static func make(_ material: Material, _ source: String) -> Result<ClientAssertionKey, ConfigValueError> {
        let found: [(String, JSONValue)]? = switch material {
        case .rsaPrivate(let key): rsaMembers(key.publicKey)
        case .rsaPublic(let key): rsaMembers(key)
        case .ecPrivate(let key): ecMembers(key.parameters)
        case .ecPublic(let key): ecMembers(key.parameters)
        }
        guard let members = found else { return .failure(ConfigValueError("is a key whose public part cannot be read")) }
        // RFC 7638 §3: the required members in lexicographic order, no whitespace.
        let thumbprintInput = JSONValue.object(members.sorted { $0.0 < $1.0 }).serialized()
        return .success(ClientAssertionKey(material: material, source: source, keyID: Base64URL.encode(SHA256.hash(thumbprintInput).bytes),
                                  publicMembers: members))
    }

    private static func rsaMembers(_ key: Insecure.RSA.PublicKey) -> [(String, JSONValue)]? {
        guard let primitives = try? key.getKeyPrimitives() else { return nil }
        // RFC 7518 §6.3.1: unsigned big-endian integers without leading zero octets.
        func unsigned(_ data: Data) -> String { Base64URL.encode(Array(data.drop { $0 == 0 })) }
        return [("kty", .string("RSA")), ("n", .string(unsigned(primitives.modulus))), ("e", .string(unsigned(primitives.publicExponent)))]
    }

    private static func ecMembers(_ parameters: ECDSAParameters?) -> [(String, JSONValue)]? {
        guard let parameters else { return nil }
        return [("kty", .string("EC")), ("crv", .string("P-256")), ("x", .string(parameters.x)), ("y", .string(parameters.y))]
    }

    /// The public JWK: its members with `use`, `alg` and `kid` (RFC 7517 §4).
    func jwk(algorithm: SignatureAlgorithm) -> JSONValue {
        .object(publicMembers + [("use", .string("sig")), ("alg", .string(algorithm.rawValue)), ("kid", .string(keyID))])
    }

    /// The key and algorithm that sign, or nil for a public key or an algorithm of another family.
    func signing(_ algorithm: SignatureAlgorithm) -> AssertionSigningKey? {
        switch (material, algorithm) {
        case (.rsaPrivate(let key), .rs256): .rs256(key)
        case (.rsaPrivate(let key), .ps256): .ps256(key)
        case (.ecPrivate(let key), .es256): .es256(key)
        default: nil
        }
    }
}

/// A private key bound to the one algorithm it signs client assertions with.
enum AssertionSigningKey: Sendable {
    case rs256(Insecure.RSA.PrivateKey)
    case ps256(Insecure.RSA.PrivateKey)
    case es256(ES256PrivateKey)

    /// A jwt-kit key collection holding this key alone under `kid`.
    func keyCollection(kid: JWKIdentifier) async -> JWTKeyCollection {
        let keys = JWTKeyCollection()
        switch self {
        case .rs256(let key): await keys.add(rsa: key, digestAlgorithm: .sha256, kid: kid)
        case .ps256(let key): await keys.add(pss: key, digestAlgorithm: .sha256, kid: kid)
        case .es256(let key): await keys.add(ecdsa: key, kid: kid)
        }
        return keys
    }
}
