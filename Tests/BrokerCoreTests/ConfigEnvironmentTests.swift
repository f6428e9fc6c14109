import BrokerCore
import Foundation
import Testing

struct ConfigEnvironmentTests {
    @Test func overrideTableListsEveryDocumentedVariable() {
        let table = ConfigLoader.environmentOverrides
        #expect(table.map(\.variable) == [
            "BROKER_LISTEN", "BROKER_PUBLIC_URL", "BROKER_THREADS", "BROKER_SHUTDOWN_DELAY_SECONDS", "BROKER_SHUTDOWN_GRACE_SECONDS",
            "BROKER_MAX_BODY_BYTES", "BROKER_MAX_HEADER_BYTES", "BROKER_MAX_URL_BYTES", "BROKER_MAX_CONNECTIONS",
            "BROKER_MAX_CONNECTIONS_PER_IP", "BROKER_IDLE_TIMEOUT_SECONDS", "BROKER_REQUEST_HEAD_TIMEOUT_SECONDS",
            "BROKER_REQUEST_BODY_MIN_BYTES_PER_SECOND", "BROKER_MAX_UPSTREAM_CALLS", "BROKER_UPSTREAM_TIMEOUT_SECONDS",
            "BROKER_LOGIN_REQUESTS_PER_MINUTE", "BROKER_TOKEN_REQUESTS_PER_MINUTE", "BROKER_REFRESH_REQUESTS_PER_MINUTE",
            "BROKER_DEVICE_CODE_ENTRIES_PER_MINUTE", "BROKER_DEVICE_CODE_MISSES_PER_MINUTE", "BROKER_MAX_PENDING_SIGN_INS",
            "BROKER_PROXY_REQUESTS_PER_MINUTE",
            "BROKER_PROXY_MAX_RESPONSE_BYTES", "BROKER_PROXY_RETRY_MAX_BODY_BYTES", "BROKER_PROXY_MAX_TRANSFERS",
            "BROKER_PROXY_MAX_TRANSFERS_PER_SESSION", "BROKER_PROXY_MAX_TRANSFERS_PER_IP", "BROKER_TLS_CERTIFICATE_FILE",
            "BROKER_TLS_KEY_FILE", "BROKER_WEBHOOK_URL", "BROKER_WEBHOOK_FAILURES_BEFORE_EVENT", "BROKER_ADMIN_LISTEN",
            "BROKER_ADMIN_TOKEN_FILE", "BROKER_ADMIN_METRICS_ONLY", "BROKER_ADMIN_TRUSTED_PROXIES", "BROKER_CORS_ORIGINS",
            "BROKER_TRUSTED_PROXIES", "BROKER_LOG_LEVEL", "BROKER_LOG_FORMAT",
            "BROKER_LOG_ACCESS", "BROKER_SESSION_IDLE_LIFETIME_SECONDS", "BROKER_SESSION_ABSOLUTE_LIFETIME_SECONDS",
            "BROKER_REFRESH_SKEW_SECONDS", "BROKER_MIN_REFRESH_INTERVAL_SECONDS", "BROKER_PROFILE_CACHE_SECONDS", "BROKER_LOGIN_LIFETIME_SECONDS",
            "BROKER_HANDOFF_LIFETIME_SECONDS", "BROKER_DEVICE_CODE_LIFETIME_SECONDS", "BROKER_DEVICE_POLL_INTERVAL_SECONDS",
            "BROKER_REVOCATION_RETRY_SECONDS", "BROKER_STATE_DIR", "BROKER_SNAPSHOT_INTERVAL_SECONDS",
            "BROKER_STATE_BACKEND", "BROKER_POSTGRES_URL", "BROKER_POSTGRES_POOL_SIZE", "BROKER_POSTGRES_STATEMENT_TIMEOUT_SECONDS",
            "BROKER_POSTGRES_CACHE_SESSIONS",
        ])
        #expect(table.first { $0.variable == "BROKER_MAX_BODY_BYTES" }?.key == "server.limits.max_body_bytes")
        #expect(table.first { $0.variable == "BROKER_LOG_LEVEL" }?.key == "log.level")
        #expect(table.first { $0.variable == "BROKER_REFRESH_SKEW_SECONDS" }?.key == "sessions.refresh_skew_seconds")
        #expect(table.first { $0.variable == "BROKER_STATE_DIR" }?.key == "state.directory")
        #expect(table.first { $0.variable == "BROKER_CORS_ORIGINS" }?.key == "server.cors_origins")
        #expect(Set(table.map(\.variable)).count == table.count)
        #expect(table.allSatisfy { !$0.description.isEmpty })
    }

    @Test func everyOverrideLands() throws {
        let environment = [
            "BROKER_LISTEN": "0.0.0.0:9000",
            "BROKER_PUBLIC_URL": "https://broker.example.com",
            "BROKER_THREADS": "6",
            "BROKER_SHUTDOWN_GRACE_SECONDS": "1.5",
            "BROKER_MAX_BODY_BYTES": "2048",
            "BROKER_MAX_HEADER_BYTES": "4096",
            "BROKER_MAX_URL_BYTES": "1024",
            "BROKER_MAX_CONNECTIONS": "64",
            "BROKER_MAX_CONNECTIONS_PER_IP": "8",
            "BROKER_IDLE_TIMEOUT_SECONDS": "5",
            "BROKER_REQUEST_HEAD_TIMEOUT_SECONDS": "3",
            "BROKER_REQUEST_BODY_MIN_BYTES_PER_SECOND": "0",
            "BROKER_LOG_LEVEL": "debug",
            "BROKER_LOG_FORMAT": "text",
            "BROKER_LOG_ACCESS": "false",
        ]
        let config = try ConfigLoader.load(path: nil, environment: environment)
        #expect(config.server.listen.description == "0.0.0.0:9000")
        #expect(config.server.publicURL.absoluteString == "https://broker.example.com")
        #expect(!config.server.publicURLIsDerived)
        #expect(config.server.threads == 6)
        #expect(config.server.shutdownGraceSeconds == 1.5)
        #expect(config.server.limits == Limits(maxBodyBytes: 2_048, maxHeaderBytes: 4_096, maxURLBytes: 1_024,
                                               maxConnections: 64, maxConnectionsPerIP: 8, idleTimeoutSeconds: 5,
                                               requestHeadTimeoutSeconds: 3, requestBodyMinBytesPerSecond: 0))
        #expect(config.log == LogConfig(level: .debug, format: .text, access: false))
    }

    @Test func forcedRefreshBoundsComeFromOneRowEach() throws {
        let defaults = try ConfigLoader.load(path: nil, environment: [:])
        #expect(defaults.sessions.minRefreshIntervalSeconds == 30)
        #expect(defaults.server.limits.refreshRequestsPerMinute == 120)
        let file = try loadConfig("server:\n  limits:\n    refresh_requests_per_minute: 7\nsessions:\n  min_refresh_interval_seconds: 5\n")
        #expect(file.sessions.minRefreshIntervalSeconds == 5)
        #expect(file.server.limits.refreshRequestsPerMinute == 7)
        let environment = try ConfigLoader.load(path: nil, environment: [
            "BROKER_MIN_REFRESH_INTERVAL_SECONDS": "0", "BROKER_REFRESH_REQUESTS_PER_MINUTE": "0",
        ])
        #expect(environment.sessions.minRefreshIntervalSeconds == 0, "0 turns the bound off")
        #expect(environment.server.limits.refreshRequestsPerMinute == 0)
        let problem = try #require(throws: ConfigError.self) {
            try ConfigLoader.load(path: nil, environment: ["BROKER_MIN_REFRESH_INTERVAL_SECONDS": "3601"])
        }
        #expect(problem.description.contains("BROKER_MIN_REFRESH_INTERVAL_SECONDS"))
        let help = ConfigLoader.environmentOverrides.first { $0.variable == "BROKER_MIN_REFRESH_INTERVAL_SECONDS" }
        #expect(help?.key == "sessions.min_refresh_interval_seconds")
        #expect(help?.description.contains("(0...3600)") == true)
    }

    @Test func environmentWinsOverTheFile() throws {
        let yaml = "server:\n  threads: 2\n  listen: 127.0.0.1:1000\nlog:\n  level: error\n"
        let config = try loadConfig(yaml, env: ["BROKER_THREADS": "4", "BROKER_LOG_LEVEL": "trace"])
        #expect(config.server.threads == 4)
        #expect(config.log.level == .trace)
        #expect(config.server.listen.port == 1000)
    }

    @Test func listenOverrideMovesTheDerivedPublicURL() throws {
        let config = try ConfigLoader.load(path: nil, environment: ["BROKER_LISTEN": "[::1]:7000"])
        #expect(config.server.publicURL.absoluteString == "http://[::1]:7000")
        #expect(config.server.callbackURL.absoluteString == "http://[::1]:7000/callback")
    }

    @Test func threadsZeroMeansOnePerCore() throws {
        let config = try ConfigLoader.load(path: nil, environment: ["BROKER_THREADS": "0"])
        #expect(config.server.threads == ProcessInfo.processInfo.activeProcessorCount)
    }

    @Test func emptyVariableCountsAsUnset() throws {
        let config = try ConfigLoader.load(path: nil, environment: ["BROKER_THREADS": "", "BROKER_LISTEN": ""])
        #expect(config.server.listen.description == "127.0.0.1:8080")
    }

    @Test func accessAcceptsTheUsualBooleanSpellings() throws {
        for (text, value) in [("true", true), ("0", false), ("YES", true), ("off", false)] {
            let config = try ConfigLoader.load(path: nil, environment: ["BROKER_LOG_ACCESS": text])
            #expect(config.log.access == value, "\(text)")
        }
    }

    @Test func badValuesAreProblemsNamedByTheVariable() {
        let environment = [
            "BROKER_LISTEN": "example.com:80",
            "BROKER_PUBLIC_URL": "ftp://broker.example.com",
            "BROKER_THREADS": "abc",
            "BROKER_SHUTDOWN_GRACE_SECONDS": "-1",
            "BROKER_MAX_BODY_BYTES": "1.5",
            "BROKER_MAX_HEADER_BYTES": "0",
            "BROKER_MAX_URL_BYTES": "x",
            "BROKER_MAX_CONNECTIONS": "0",
            "BROKER_MAX_CONNECTIONS_PER_IP": "-4",
            "BROKER_IDLE_TIMEOUT_SECONDS": "forever",
            "BROKER_LOG_LEVEL": "verbose",
            "BROKER_LOG_FORMAT": "xml",
            "BROKER_LOG_ACCESS": "perhaps",
        ]
        var found: [ConfigProblem] = []
        do {
            _ = try ConfigLoader.load(path: nil, environment: environment)
        } catch {
            found = error.problems
        }
        #expect(Set(found.map(\.key)) == Set(environment.keys))
        #expect(found.allSatisfy { $0.line == nil && $0.file == nil })
        expectProblem(found, key: "BROKER_LISTEN", contains: "host must be an IP address or localhost")
        expectProblem(found, key: "BROKER_PUBLIC_URL", contains: "scheme must be https")
        expectProblem(found, key: "BROKER_THREADS", contains: "expected an integer, got \"abc\"")
        expectProblem(found, key: "BROKER_SHUTDOWN_GRACE_SECONDS", contains: "must be between 0 and 3600, got -1")
        expectProblem(found, key: "BROKER_MAX_BODY_BYTES", contains: "expected an integer, got \"1.5\"")
        expectProblem(found, key: "BROKER_LOG_LEVEL", contains: "expected one of trace, debug")
        expectProblem(found, key: "BROKER_LOG_FORMAT", contains: "got \"xml\"")
        expectProblem(found, key: "BROKER_LOG_ACCESS", contains: "expected true or false")
    }

    @Test func publicURLMayNotCarryAQueryOrFragment() {
        for url in ["https://broker.example.com/?x=1", "https://broker.example.com/#top", "/relative"] {
            do {
                _ = try ConfigLoader.load(path: nil, environment: ["BROKER_PUBLIC_URL": url])
                Issue.record("\(url) should be refused")
            } catch {
                #expect(error.problems.map(\.key) == ["BROKER_PUBLIC_URL"])
            }
        }
    }
}
