import Foundation

/// The configuration while it is being assembled from defaults, the file and the environment,
/// before derived values (the public URL, the thread count) are worked out.
struct ConfigDraft: Sendable {
    var listen = ListenAddress(host: "127.0.0.1", port: 8080)
    var publicURL: URL?
    var threads = 0
    var shutdownGraceSeconds = 10.0
    var limits = Limits()
    var log = LogConfig()
    var providers: [ProviderConfig] = []
    var apps: [AppConfig] = []
    /// The file line of each scalar setting read from the file and not since overridden.
    var lines: [String: Int] = [:]

    /// The finished configuration.
    func finish() -> BrokerConfig {
        BrokerConfig(
            server: ServerConfig(listen: listen, publicURL: publicURL, threads: threads,
                                 shutdownGraceSeconds: shutdownGraceSeconds, limits: limits),
            log: log,
            providers: providers,
            apps: apps
        )
    }

    /// Checks between settings that can only be made once file and environment are merged.
    func crossCheck(file: String?) -> [ConfigProblem] {
        var problems: [ConfigProblem] = []
        if limits.maxConnectionsPerIP > limits.maxConnections {
            let key = "server.limits.max_connections_per_ip"
            let line = lines[key]
            problems.append(ConfigProblem(
                key: key,
                message: "must not exceed max_connections (\(limits.maxConnections)), got \(limits.maxConnectionsPerIP)",
                line: line, file: line == nil ? nil : file))
        }
        return problems
    }
}
