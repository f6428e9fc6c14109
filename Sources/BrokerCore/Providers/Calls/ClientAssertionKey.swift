import BrokerCrypto
import Foundation
import WireValues

/// A key of the broker's as a provider's client, read from a PEM file: RSA (2048 bits or more)
/// or EC P-256, private (it can sign client assertions) or public (it is only published, as the
/// second key of a rotation). Printing or dumping it shows its `kid`, never its material.
public struct ClientAssertionKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The key, read through libcrypto.
    let material: PEMKey
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

    /// Whether it holds a private key (else only a public one).
    var isPrivate: Bool { material.isPrivate }

    /// `RSA` or `EC P-256`.
    var family: String {
        switch material.kind {
        case .rsa: "RSA"
        case .ecP256: "EC P-256"
        }
    }

    /// The algorithms a key of this family signs with here.
    var algorithms: [SignatureAlgorithm] {
        switch material.kind {
        case .rsa: [.rs256, .ps256]
        case .ecP256: [.es256]
        }
    }

    /// Reads a PEM key: a private key (PKCS#8 `PRIVATE KEY`, `RSA PRIVATE KEY` or `EC PRIVATE
    /// KEY`), or, when `publicAllowed`, a public one (`PUBLIC KEY`). The message of a failure
    /// names what was expected, never the file's content.
    static func parse(pem: String, source: String, publicAllowed: Bool) -> Result<ClientAssertionKey, ConfigValueError> {
        guard let key = PEMKey(pem: pem, publicAllowed: publicAllowed) else {
            let expected = publicAllowed ? "a PEM private or public key" : "a PEM private key"
            return .failure(ConfigValueError("is not \(expected) of a supported kind: RSA of 2048 bits or more, or EC P-256 "
                + "(unencrypted; PKCS#8, PKCS#1 or SEC 1)"))
        }
        guard let (first, second) = key.publicMembers else { return .failure(ConfigValueError("is a key whose public part cannot be read")) }
        // RFC 7518 §6.3.1 and §6.2.1: base64url of the big-endian integers (RSA's without
        // leading zero octets, EC coordinates at their full length).
        let members: [(String, JSONValue)] = switch key.kind {
        case .rsa: [("kty", .string("RSA")), ("n", .string(Base64URL.encode(first))), ("e", .string(Base64URL.encode(second)))]
        case .ecP256: [("kty", .string("EC")), ("crv", .string("P-256")), ("x", .string(Base64URL.encode(first))),
                       ("y", .string(Base64URL.encode(second)))]
        }
        // RFC 7638 §3: the required members in lexicographic order, no whitespace.
        let thumbprintInput = JSONValue.object(members.sorted { $0.0 < $1.0 }).serialized()
        return .success(ClientAssertionKey(material: key, source: source, keyID: Base64URL.encode(SHA256.hash(thumbprintInput).bytes),
                                           publicMembers: members))
    }

    /// The public JWK: its members with `use`, `alg` and `kid` (RFC 7517 §4).
    func jwk(algorithm: SignatureAlgorithm) -> JSONValue {
        .object(publicMembers + [("use", .string("sig")), ("alg", .string(algorithm.rawValue)), ("kid", .string(keyID))])
    }

    /// The algorithm a private key of this family signs with as libcrypto names it, or nil for a
    /// public key or an algorithm of another family.
    func signing(_ algorithm: SignatureAlgorithm) -> PEMKey.Algorithm? {
        guard isPrivate, algorithms.contains(algorithm) else { return nil }
        return PEMKey.Algorithm(rawValue: algorithm.rawValue)
    }
}
