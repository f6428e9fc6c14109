import Yams

/// `resource_servers`: the backends that may ask `POST /introspect` (RFC 7662) about the session
/// tokens their clients send them (docs/introspection.md). Each has an id and a secret
/// (`secret_env` or `secret_file`, 32 characters or more), sent as HTTP Basic or as the form's
/// `client_id` and `client_secret`; its calls are limited to `requests_per_minute`.
public struct ResourceServerConfig: Sendable {
    public let id: String
    public let secret: Secret
    public let requestsPerMinute: Int

    /// The shortest secret accepted, as for the admin token (`token-broker gen-key` makes 44).
    static let minimumSecretLength = 32
    static let defaultRequestsPerMinute = 6000
    static let requestsPerMinuteRange = 1...1_000_000
}

extension ConfigDocumentDecoder {
    /// Reads `resource_servers`: for each id, its secret (exactly one of `secret_env` and
    /// `secret_file`) and its `requests_per_minute`.
    func decodeResourceServers(_ node: Node, into draft: inout ConfigDraft, problems: inout ConfigProblemList) {
        let root = ConfigKeyPath.root.child("resource_servers")
        guard let servers = YAMLMappingReader(node, at: root, known: nil, problems: &problems) else { return }
        for id in servers.keys {
            let path = servers.path.child(id)
            let line = servers.line(of: id)
            guard problems.check(ConfigIdentifier.validate(id), at: path, line: line) != nil, let value = servers.node(id),
                  let reader = YAMLMappingReader(value, at: path, known: ["secret_env", "secret_file", "requests_per_minute"],
                                                 problems: &problems) else { continue }
            var perMinute = ResourceServerConfig.defaultRequestsPerMinute
            if let text = reader.scalar("requests_per_minute", expected: "a number of requests", problems: &problems) {
                switch ConfigValueParsing.integer(text, in: ResourceServerConfig.requestsPerMinuteRange) {
                case .success(let value): perMinute = value
                case .failure(let error): problems.add(path.child("requests_per_minute"), error, line: reader.line(of: "requests_per_minute"))
                }
            }
            switch reader.secretReference("secret", problems: &problems) {
            case .absent:
                problems.add(path.child("secret_env"), "required: a resource server authenticates with a secret (secret_env or secret_file)", line: line)
            case .invalid:
                break
            case .found(let reference, let key):
                switch reference.resolve(environment: environment, baseDirectory: baseDirectory) {
                case .success(let secret) where secret.reveal().count < ResourceServerConfig.minimumSecretLength:
                    problems.add(path.child(key), "the secret must be at least \(ResourceServerConfig.minimumSecretLength) characters "
                        + "(`token-broker gen-key` makes one)", line: reader.line(of: key))
                case .success(let secret):
                    draft.resourceServers.append(ResourceServerConfig(id: id, secret: secret, requestsPerMinute: perMinute))
                case .failure(let error):
                    problems.add(path.child(key), error.message, line: reader.line(of: key))
                }
            }
        }
    }
}
