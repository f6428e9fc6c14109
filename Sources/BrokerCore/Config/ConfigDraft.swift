import Foundation
import WireValues

/// The configuration while it is being assembled from defaults, the file and the environment,
/// before derived values (the public URL) are worked out and settings that arrive one key at a
/// time (TLS files, the webhook URL and secret) are checked together. It starts from
/// ``BrokerConfig/defaults`` and writes no default of its own (see ``BrokerConfig``).
struct ConfigDraft: Sendable {
    var listen = BrokerConfig.defaults.server.listen
    /// The configured public URL; nil: derived from `listen` in ``finish()``.
    var publicURL: URL?
    /// Request threads as configured; 0 (one per core) is resolved by ``ServerConfig``, as the
    /// default already is.
    var threads = BrokerConfig.defaults.server.threads
    var shutdownDelaySeconds = BrokerConfig.defaults.server.shutdownDelaySeconds
    var shutdownGraceSeconds = BrokerConfig.defaults.server.shutdownGraceSeconds
    var limits = BrokerConfig.defaults.server.limits
    var corsOrigins = BrokerConfig.defaults.server.corsOrigins
    var trustedProxies = BrokerConfig.defaults.server.trustedProxies
    var webhookURL: URL?
    var webhookFailuresBeforeEvent = WebhookSettings.defaultFailuresBeforeEvent
    var webhookSecret: Secret?
    var adminListen: ListenAddress?
    var adminTrustedProxies: [IPNetwork] = []
    var adminMetricsOnly = false
    /// `admin.token_file` as written; ``resolveAdminToken(environment:baseDirectory:file:)``
    /// reads it into ``adminToken``.
    var adminTokenFile: String?
    var adminToken: Secret?
    /// The TLS files as written; ``resolveTLSFiles(baseDirectory:file:)`` resolves and checks them.
    var tlsCertificateFile: String?
    var tlsKeyFile: String?
    var log = BrokerConfig.defaults.log
    var sessions = BrokerConfig.defaults.sessions
    /// The `state` settings; ``resolveStateKeys(environment:baseDirectory:file:)`` fills in its
    /// keys and key source.
    var state = BrokerConfig.defaults.state
    /// Where the state keys are read from; `nil` when `state.key_env` or `state.key_file` was
    /// wrong (already reported), so that nothing is read.
    var stateKeyReference: StateKeyReference? = .environment(StateSettings.defaultKeyVariable)
    var providers: [ProviderConfig] = []
    var apps: [AppConfig] = []
    var resourceServers: [ResourceServerConfig] = []
    /// The file line of each scalar setting read from the file and not since overridden.
    var lines: [String: Int] = [:]

    /// The finished configuration.
    func finish() -> BrokerConfig {
        BrokerConfig(
            server: ServerConfig(listen: listen, publicURL: publicURL, threads: threads,
                                 shutdownDelaySeconds: shutdownDelaySeconds, shutdownGraceSeconds: shutdownGraceSeconds, limits: limits, corsOrigins: corsOrigins,
                                 trustedProxies: trustedProxies,
                                 tls: tlsCertificateFile.flatMap { certificate in
                                     tlsKeyFile.map { TLSFiles(certificateFile: certificate, keyFile: $0) }
                                 }),
            log: log,
            sessions: sessions,
            state: state,
            webhooks: webhookURL.flatMap { url in
                webhookSecret.map { WebhookSettings(url: url, secret: $0, failuresBeforeEvent: webhookFailuresBeforeEvent) }
            },
            admin: admin,
            resourceServers: resourceServers,
            providers: providers,
            apps: apps
        )
    }

    /// Checks between settings that can only be made once file and environment are merged.
    func crossCheck(file: String?) -> [ConfigProblem] {
        var problems: [ConfigProblem] = []
        if webhookURL != nil && webhookSecret == nil {
            problems.append(ConfigProblem(key: "webhooks.secret_env", message: "a webhook needs a signing secret: set webhooks.secret_env or webhooks.secret_file", line: lines["webhooks.url"], file: file))
        }
        // A webhook written in the file without its URL sends nothing, silently.
        if webhookURL == nil, let key = ["webhooks.secret_env", "webhooks.secret_file", "webhooks.failures_before_event"].first(where: { lines[$0] != nil }) {
            problems.append(ConfigProblem(key: key, message: "has no effect without webhooks.url (or BROKER_WEBHOOK_URL): no event would be sent",
                                          line: lines[key], file: file))
        }
        if limits.maxConnectionsPerIP > limits.maxConnections {
            let key = "server.limits.max_connections_per_ip"
            let line = lines[key]
            problems.append(ConfigProblem(
                key: key,
                message: "must not exceed max_connections (\(limits.maxConnections)), got \(limits.maxConnectionsPerIP)",
                line: line, file: line == nil ? nil : file))
        }
        if state.backend == .postgres && state.postgres.url == nil {
            let key = "state.backend"
            let line = lines[key]
            problems.append(ConfigProblem(key: "state.postgres.url", message: "state.backend postgres needs state.postgres.url (or BROKER_POSTGRES_URL)",
                                          line: line, file: line == nil ? nil : file))
        }
        if sessions.absoluteLifetimeSeconds < sessions.idleLifetimeSeconds {
            let key = "sessions.absolute_lifetime_seconds"
            let line = lines[key]
            let idle = ConfigValueParsing.format(sessions.idleLifetimeSeconds)
            let absolute = ConfigValueParsing.format(sessions.absoluteLifetimeSeconds)
            problems.append(ConfigProblem(
                key: key,
                message: "must be at least idle_lifetime_seconds (\(idle)), got \(absolute)",
                line: line, file: line == nil ? nil : file))
        }
        return problems
    }
}
