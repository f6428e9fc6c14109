import BrokerCrypto
import Foundation
import WireValues
import Yams

/// `resource_servers`: the backends that may ask `POST /introspect` (RFC 7662) about the session
/// tokens their clients send them (docs/introspection.md). Each has an id and either a secret
/// (`secret_env` or `secret_file`, 32 characters or more), sent as HTTP Basic or as the form's
/// `client_id` and `client_secret`, or the public keys of its `private_key_jwt` assertions
/// (`jwks_file`, RFC 7523); its calls are limited to `requests_per_minute`.
public struct ResourceServerConfig: Sendable {
    public let id: String
    public let credential: ResourceServerCredential
    public let requestsPerMinute: Int

    /// The shortest secret accepted, as for the admin token (`token-broker gen-key` makes 44).
    static let minimumSecretLength = 32
    static let defaultRequestsPerMinute = 6000
    static let requestsPerMinuteRange = 1...1_000_000
}

/// How a resource server authenticates.
public enum ResourceServerCredential: Sendable {
    case secret(Secret)
    /// Client assertions (`private_key_jwt`) signed by one of these keys, from `file`.
    case keys([ResourceServerKey], file: String)

    /// The file the credential is read from, when it is one.
    var secretFile: String? {
        if case .secret(let secret) = self { return secret.file }
        return nil
    }
}

/// One public key of a resource server's key set: its `kid` (when the set gives one) and the one
/// algorithm (`alg`, required in the set) it checks.
public struct ResourceServerKey: Sendable {
    public let keyID: String?
    let key: VerificationKey

    /// The usable keys of a JWKS document (RFC 7517 §5), or why it is none: every key needs an
    /// `alg` the broker checks, public members only, and a `kid` unique in the set (when there
    /// are several).
    static func parse(_ data: Data) -> Result<[ResourceServerKey], ConfigValueError> {
        guard let document = try? JSONValue.parse([UInt8](data)), case .array(let entries)? = document["keys"], !entries.isEmpty else {
            return .failure(ConfigValueError("is not a JSON Web Key Set: an object with a non-empty keys array"))
        }
        var keys: [ResourceServerKey] = []
        for (index, entry) in entries.enumerated() {
            let name = "key \(index + 1) of \(entries.count)"
            guard let alg = entry["alg"]?.stringValue, let algorithm = VerificationKey.Algorithm(rawValue: alg),
                  DPoPProof.accepted.contains(algorithm) else {
                return .failure(ConfigValueError("\(name) needs an alg, one of \(DPoPProof.algorithmNames)"))
            }
            let keyID = entry["kid"]?.stringValue
            if entries.count > 1, keyID == nil || keys.contains(where: { $0.keyID == keyID }) {
                return .failure(ConfigValueError("\(name) needs a kid of its own: assertions name the key that signed them"))
            }
            do throws(PublicJWK.Refusal) {
                keys.append(ResourceServerKey(keyID: keyID, key: try PublicJWK(entry, algorithm: algorithm).key))
            } catch {
                let why = switch error {
                case .privateMember(let member): "holds the private member \(member): give the public key only"
                case .wrongType: "is not a public key of the type \(alg) needs"
                case .badMember(let member): "has no valid \(member)"
                case .notAnObject: "is not a JSON object"
                case .unusable: "is no usable key (a point off its curve, or an RSA key under 2048 bits)"
                }
                return .failure(ConfigValueError("\(name) \(why)"))
            }
        }
        return .success(keys)
    }
}

extension ConfigDocumentDecoder {
    /// Reads `resource_servers`: for each id, its credential (exactly one of `secret_env`,
    /// `secret_file` and `jwks_file`) and its `requests_per_minute`.
    func decodeResourceServers(_ node: Node, into draft: inout ConfigDraft, problems: inout ConfigProblemList) {
        let root = ConfigKeyPath.root.child("resource_servers")
        guard let servers = YAMLMappingReader(node, at: root, known: nil, problems: &problems) else { return }
        for id in servers.keys {
            let path = servers.path.child(id)
            let line = servers.line(of: id)
            guard problems.check(ConfigIdentifier.validate(id), at: path, line: line) != nil, let value = servers.node(id),
                  let reader = YAMLMappingReader(value, at: path, known: ["secret_env", "secret_file", "jwks_file", "requests_per_minute"],
                                                 problems: &problems) else { continue }
            var perMinute = ResourceServerConfig.defaultRequestsPerMinute
            if let text = reader.scalar("requests_per_minute", expected: "a number of requests", problems: &problems) {
                switch ConfigValueParsing.integer(text, in: ResourceServerConfig.requestsPerMinuteRange) {
                case .success(let value): perMinute = value
                case .failure(let error): problems.add(path.child("requests_per_minute"), error, line: reader.line(of: "requests_per_minute"))
                }
            }
            let credential = decodeCredential(reader, path: path, line: line, problems: &problems)
            if let credential {
                draft.resourceServers.append(ResourceServerConfig(id: id, credential: credential, requestsPerMinute: perMinute))
            }
        }
    }

    private func decodeCredential(_ reader: YAMLMappingReader, path: ConfigKeyPath, line: Int?,
                                  problems: inout ConfigProblemList) -> ResourceServerCredential? {
        let secret = reader.secretReference("secret", problems: &problems)
        if reader.has("jwks_file") {
            if case .absent = secret {} else {
                problems.add(path.child("jwks_file"), "set either a secret (secret_env or secret_file) or jwks_file, not both",
                             line: reader.line(of: "jwks_file"))
                return nil
            }
            guard let file = reader.string("jwks_file", problems: &problems) else { return nil }
            let fullPath = SecretReference.absolutePath(file, baseDirectory: baseDirectory)
            let keys = SecretReference.readText(fullPath, what: "key set file").flatMap { text in
                ResourceServerKey.parse(Data(text.utf8)).mapError { ConfigValueError("\(fullPath) \($0.message)") }
            }
            return problems.check(keys, at: path.child("jwks_file"), line: reader.line(of: "jwks_file")).map { .keys($0, file: fullPath) }
        }
        switch secret {
        case .absent:
            problems.add(path.child("secret_env"), "required: a resource server authenticates with a secret (secret_env or secret_file) "
                + "or with signed assertions (jwks_file)", line: line)
        case .invalid:
            break
        case .found(let reference, let key):
            switch reference.resolve(environment: environment, baseDirectory: baseDirectory) {
            case .success(let secret) where secret.reveal().count < ResourceServerConfig.minimumSecretLength:
                problems.add(path.child(key), "the secret must be at least \(ResourceServerConfig.minimumSecretLength) characters "
                    + "(`token-broker gen-key` makes one)", line: reader.line(of: key))
            case .success(let secret):
                return .secret(secret)
            case .failure(let error):
                problems.add(path.child(key), error.message, line: reader.line(of: key))
            }
        }
        return nil
    }
}
