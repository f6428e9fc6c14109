import Foundation
import HTTPServer
import WireValues
import Testing

@testable import BrokerCore

/// Each default is written once, in the configuration model (``BrokerConfig``): the server's
/// transport settings, README's Configuration table and `config/example.yaml` must agree with it.
struct ConfigDefaultsTests {
    /// The model's default for each key whose README row states one, written as README writes it.
    private static func modelDefaults(_ config: BrokerConfig) -> [String: String] {
        let server = config.server, limits = config.server.limits, sessions = config.sessions
        let seconds = ConfigValueParsing.format
        let list = { (items: [String]) in items.isEmpty ? "none" : items.joined(separator: ",") }
        return [
            "server.shutdown_delay_seconds": seconds(server.shutdownDelaySeconds),
            "server.shutdown_grace_seconds": seconds(server.shutdownGraceSeconds),
            "server.limits.max_body_bytes": "\(limits.maxBodyBytes)",
            "server.limits.max_header_bytes": "\(limits.maxHeaderBytes)",
            "server.limits.max_url_bytes": "\(limits.maxURLBytes)",
            "server.limits.max_connections": "\(limits.maxConnections)",
            "server.limits.max_connections_per_ip": "\(limits.maxConnectionsPerIP)",
            "server.limits.idle_timeout_seconds": "\(limits.idleTimeoutSeconds)",
            "server.limits.request_head_timeout_seconds": "\(limits.requestHeadTimeoutSeconds)",
            "server.limits.request_body_min_bytes_per_second": "\(limits.requestBodyMinBytesPerSecond)",
            "server.limits.max_upstream_calls": "\(limits.maxUpstreamCalls)",
            "server.limits.upstream_timeout_seconds": "\(limits.upstreamTimeoutSeconds)",
            "server.limits.login_requests_per_minute": "\(limits.loginRequestsPerMinute)",
            "server.limits.token_requests_per_minute": "\(limits.tokenRequestsPerMinute)",
            "server.limits.refresh_requests_per_minute": "\(limits.refreshRequestsPerMinute)",
            "server.limits.device_code_entries_per_minute": "\(limits.deviceCodeEntriesPerMinute)",
            "server.limits.device_code_misses_per_minute": "\(limits.deviceCodeMissesPerMinute)",
            "server.limits.max_pending_sign_ins": "\(limits.maxPendingSignIns)",
            "server.limits.proxy_requests_per_minute": "\(limits.proxyRequestsPerMinute)",
            "server.limits.proxy_max_response_bytes": "\(limits.proxyMaxResponseBytes)",
            "server.limits.proxy_retry_max_body_bytes": "\(limits.proxyRetryMaxBodyBytes)",
            "server.limits.proxy_max_transfers": "\(limits.proxyMaxTransfers)",
            "server.limits.proxy_max_transfers_per_session": "\(limits.proxyMaxTransfersPerSession)",
            "server.limits.proxy_max_transfers_per_ip": "\(limits.proxyMaxTransfersPerIP)",
            "server.cors_origins": list(server.corsOrigins),
            "server.trusted_proxies": list(server.trustedProxies.map(\.description)),
            "admin.trusted_proxies": list(config.admin?.trustedProxies.map(\.description) ?? []),
            "log.level": config.log.level.rawValue,
            "log.access": "\(config.log.access)",
            "sessions.idle_lifetime_seconds": seconds(sessions.idleLifetimeSeconds),
            "sessions.absolute_lifetime_seconds": seconds(sessions.absoluteLifetimeSeconds),
            "sessions.refresh_skew_seconds": seconds(sessions.refreshSkewSeconds),
            "sessions.min_refresh_interval_seconds": seconds(sessions.minRefreshIntervalSeconds),
            "sessions.profile_cache_seconds": seconds(sessions.profileCacheSeconds),
            "sessions.login_lifetime_seconds": seconds(sessions.loginLifetimeSeconds),
            "sessions.handoff_lifetime_seconds": seconds(sessions.handoffLifetimeSeconds),
            "sessions.device_code_lifetime_seconds": seconds(sessions.deviceCodeLifetimeSeconds),
            "sessions.device_poll_interval_seconds": seconds(sessions.devicePollIntervalSeconds),
            "sessions.revocation_retry_seconds": seconds(sessions.revocationRetrySeconds),
            "state.directory": config.state.directory,
            "state.snapshot_interval_seconds": seconds(config.state.snapshotIntervalSeconds),
            "state.postgres.pool_size": "\(config.state.postgres.poolSize)",
            "state.postgres.statement_timeout_seconds": "\(config.state.postgres.statementTimeoutSeconds)",
            "state.postgres.cache_sessions": "\(config.state.postgres.cacheSessions)",
            "webhooks.failures_before_event": "\(WebhookSettings.defaultFailuresBeforeEvent)",
        ]
    }

    /// Where README's stated defaults and the model's differ, one line each; also a stated default
    /// the model has no entry for, and a model default README does not state.
    private static func mismatches(readme: String) -> [String] {
        let model = modelDefaults(.defaults)
        var stated: [String: String] = [:]
        for row in ReadmeConfigTable.rows(of: readme) {
            guard let value = row.statedDefault else { continue }
            for key in row.keys { stated[key] = value }
        }
        var found: [String] = []
        for key in Set(model.keys).union(stated.keys).sorted() where model[key] != stated[key] {
            found.append("\(key): README \(stated[key] ?? "states none"), model \(model[key] ?? "has none")")
        }
        return found
    }

    @Test func readmeStatesTheModelDefaults() throws {
        let readme = try String(contentsOfFile: ReadmeConfigTable.path, encoding: .utf8)
        #expect(Self.mismatches(readme: readme) == [])
        // Negative controls: a changed number, and a default stated for a key the model lacks.
        let changed = readme.replacingOccurrences(of: "| default 65536 → 413 |", with: "| default 65537 → 413 |")
        #expect(changed != readme)
        #expect(Self.mismatches(readme: changed) == ["server.limits.max_body_bytes: README 65537, model 65536"])
        let added = readme.replacingOccurrences(of: "`BROKER_THREADS` | `server.threads` | request threads; 0 = one per core |",
                                                with: "`BROKER_THREADS` | `server.threads` | request threads (default 1) |")
        #expect(added != readme)
        #expect(Self.mismatches(readme: added) == ["server.threads: README 1, model has none"])
    }

    /// README's table lists exactly the variables and keys of the one settings table
    /// (``ConfigLoader/environmentOverrides``), besides the secret references, which are not overrides.
    @Test func readmeListsTheSettingsTable() throws {
        let readme = try String(contentsOfFile: ReadmeConfigTable.path, encoding: .utf8)
        var pairs: Set<String> = []
        for row in ReadmeConfigTable.rows(of: readme) where row.variables.count == row.keys.count {
            pairs.formUnion(zip(row.variables, row.keys).map { "\($0) \($1)" })
        }
        let table = Set(ConfigLoader.environmentOverrides.map { "\($0.variable) \($0.key)" })
        #expect(pairs.subtracting(table) == ["BROKER_STATE_KEY state.key_env", "BROKER_POSTGRES_PASSWORD state.postgres.password_env",
                                             "BROKER_POSTGRES_PASSWORD_FILE state.postgres.password_file"])
        #expect(table.subtracting(pairs) == [])
    }

    /// `config/example.yaml` writes every setting at its default ("Any key left out takes the
    /// default shown in its comment"), so loading it gives the model's defaults.
    @Test func exampleFileWritesTheModelDefaults() throws {
        let example = try ConfigLoader.load(path: ExampleConfig.path,
                                            environment: try ExampleConfig.secretEnvironment(value: "x"))
        let defaults = BrokerConfig.defaults
        #expect(example.server.listen == defaults.server.listen)
        #expect(example.server.threads == defaults.server.threads)
        #expect(example.server.shutdownGraceSeconds == defaults.server.shutdownGraceSeconds)
        #expect(example.server.limits == defaults.server.limits)
        #expect(example.server.corsOrigins == defaults.server.corsOrigins)
        #expect(example.server.trustedProxies == defaults.server.trustedProxies)
        #expect(example.log == defaults.log)
        #expect(example.sessions == defaults.sessions)
        #expect(example.state.backend == defaults.state.backend && example.state.postgres == defaults.state.postgres)
    }

    /// The transport's settings, built from `BrokerConfig()`, are the defaults README states; the
    /// transport writes none of its own.
    @Test func transportGetsTheModelDefaults() throws {
        let transport = try BrokerConfig().server.serverConfiguration()
        #expect(transport.host == "127.0.0.1")
        #expect(transport.port == 8080)
        #expect(transport.threads == ProcessInfo.processInfo.activeProcessorCount)
        #expect(transport.threads >= 1)
        #expect(transport.maxBodyBytes == 65_536)
        #expect(transport.maxHeaderBytes == 8_192)
        #expect(transport.maxURLBytes == 4_096)
        #expect(transport.maxConnections == 1_024)
        #expect(transport.maxConnectionsPerIP == 128)
        #expect(transport.idleTimeoutSeconds == 30)
        #expect(transport.requestHeadTimeoutSeconds == 10)
        #expect(transport.requestBodyMinBytesPerSecond == 1_024)
        #expect(transport.corsOrigins.isEmpty)
        #expect(transport.trustedProxies.isEmpty)
        #expect(transport.corsClosedPrefixes == ["/admin/"], "the admin API never answers CORS")
        #expect(transport.tls == nil)
    }

    /// Every transport value comes from its own setting: each configured value differs from its
    /// default and from the others, so a value taken from a default or a wrong field shows.
    @Test func everyTransportValueComesFromItsSetting() throws {
        let limits = Limits(maxBodyBytes: 2_001, maxHeaderBytes: 2_002, maxURLBytes: 2_003, maxConnections: 2_004,
                            maxConnectionsPerIP: 2_005, idleTimeoutSeconds: 2_006, requestHeadTimeoutSeconds: 2_007,
                            requestBodyMinBytesPerSecond: 2_008)
        #expect(limits != Limits())
        let proxies = try TrustedProxies.parse("10.0.0.0/8").get()
        let server = ServerConfig(listen: try ListenAddress(parsing: "[::1]:9000"), threads: 3, limits: limits,
                                  corsOrigins: ["https://app.example.com"], trustedProxies: proxies)
        let transport = try server.serverConfiguration()
        #expect(transport.host == "::1")
        #expect(transport.port == 9000)
        #expect(transport.threads == 3)
        #expect([transport.maxBodyBytes, transport.maxHeaderBytes, transport.maxURLBytes, transport.maxConnections,
                 transport.maxConnectionsPerIP, transport.idleTimeoutSeconds, transport.requestHeadTimeoutSeconds,
                 transport.requestBodyMinBytesPerSecond] == Array(2_001...2_008))
        #expect(transport.corsOrigins == ["https://app.example.com"])
        #expect(transport.trustedProxies == proxies)
        #expect(try ServerConfig(listen: ListenAddress(parsing: "localhost:1")).serverConfiguration().host == "127.0.0.1")
    }

    /// `threads` 0 means one thread per core, resolved once, by ``ServerConfig``: the transport
    /// only ever sees a positive count.
    @Test func threadsZeroIsResolvedOnce() throws {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        #expect(ServerConfig(threads: 0).threads == cores)
        #expect(ServerConfig().threads == cores)
        #expect(ServerConfig(threads: 1).threads == 1, "a configured count is kept")
        #expect(try ServerConfig(threads: 0).serverConfiguration().threads == cores)
        #expect(try loadConfig("server:\n  threads: 0\n").server.threads == cores)
    }

    /// The provider-call limits come from the same settings.
    @Test func upstreamLimitsComeFromTheSettings() {
        let defaults = Limits().upstream
        #expect(defaults.maxInFlight == 256)
        #expect(defaults.totalTimeout == .seconds(10))
        #expect(defaults.silenceTimeout == .seconds(5))
        let configured = Limits(maxUpstreamCalls: 7, upstreamTimeoutSeconds: 1).upstream
        #expect(configured.maxInFlight == 7)
        #expect(configured.totalTimeout == .seconds(1))
        #expect(configured.silenceTimeout == .seconds(1), "silence gets at least a second")
    }
}
