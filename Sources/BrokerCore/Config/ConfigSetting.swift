import Foundation

/// A scalar setting of the `server`, `log`, `sessions` and `state` sections: its key, its
/// environment override and how its text is parsed. YAML values and environment values go
/// through the same `apply`, so both accept the same spellings and give the same messages.
struct ConfigSetting: Sendable {
    /// Dotted key in the file, such as `server.limits.max_body_bytes`.
    let key: String
    /// The environment variable that overrides it; `nil` for a setting only the file sets.
    let variable: String?
    /// One line for `--help` and the README.
    let description: String
    /// What a value should be, for type errors: "an integer", "true or false".
    let expected: String
    /// Parses `text` and stores the value in the draft.
    let apply: @Sendable (inout ConfigDraft, String) -> Result<Void, ConfigValueError>

    /// Every scalar setting, in the order the README lists them.
    static let all: [ConfigSetting] = [
        ConfigSetting(key: "server.listen", variable: "BROKER_LISTEN",
                      description: "address and port to listen on, HOST:PORT ([::1]:8080 for IPv6; port 0 = any free port)",
                      expected: "HOST:PORT") { draft, text in
            ListenAddress.parse(text).map { draft.listen = $0 }
        },
        ConfigSetting(key: "server.public_url", variable: "BROKER_PUBLIC_URL",
                      description: "the broker's external base URL (default http://<listen>); the provider callback is <public_url>/callback",
                      expected: "a URL") { draft, text in
            // Without a trailing `/`: every address the broker makes is this one and a path.
            ConfigURLRules.parse(text, allowInsecureHTTP: true, allowQuery: false).map { url in
                var base = url.absoluteString
                while base.hasSuffix("/") { base.removeLast() }
                draft.publicURL = URL(string: base) ?? url
            }
        },
        ConfigSetting(key: "server.threads", variable: "BROKER_THREADS",
                      description: "request threads (0 = one per core)", expected: "an integer") { draft, text in
            ConfigValueParsing.integer(text, in: ServerConfig.threadsRange).map { draft.threads = $0 }
        },
        ConfigSetting(key: "server.shutdown_delay_seconds", variable: "BROKER_SHUTDOWN_DELAY_SECONDS",
                      description: "on SIGTERM, seconds the broker goes on serving, /readyz answering 503, before it stops accepting",
                      expected: "a number") { draft, text in
            ConfigValueParsing.number(text, in: ServerConfig.shutdownDelaySecondsRange).map { draft.shutdownDelaySeconds = $0 }
        },
        ConfigSetting(key: "server.shutdown_grace_seconds", variable: "BROKER_SHUTDOWN_GRACE_SECONDS",
                      description: "on SIGTERM, seconds pending requests get to finish once the broker stops accepting",
                      expected: "a number") { draft, text in
            ConfigValueParsing.number(text, in: ServerConfig.shutdownGraceSecondsRange).map { draft.shutdownGraceSeconds = $0 }
        },
        limit("max_body_bytes", "BROKER_MAX_BODY_BYTES", "largest request body, in bytes",
              Limits.maxBodyBytesRange, { $0.maxBodyBytes = $1 }),
        limit("max_header_bytes", "BROKER_MAX_HEADER_BYTES", "largest total size of request headers, in bytes",
              Limits.maxHeaderBytesRange, { $0.maxHeaderBytes = $1 }),
        limit("max_url_bytes", "BROKER_MAX_URL_BYTES", "longest request target (path and query), in bytes",
              Limits.maxURLBytesRange, { $0.maxURLBytes = $1 }),
        limit("max_connections", "BROKER_MAX_CONNECTIONS", "most connections open at once",
              Limits.maxConnectionsRange, { $0.maxConnections = $1 }),
        limit("max_connections_per_ip", "BROKER_MAX_CONNECTIONS_PER_IP", "most connections open at once from one IP address",
              Limits.maxConnectionsPerIPRange, { $0.maxConnectionsPerIP = $1 }),
        limit("idle_timeout_seconds", "BROKER_IDLE_TIMEOUT_SECONDS", "seconds an idle connection is kept open",
              Limits.idleTimeoutSecondsRange, { $0.idleTimeoutSeconds = $1 }),
        limit("request_head_timeout_seconds", "BROKER_REQUEST_HEAD_TIMEOUT_SECONDS",
              "seconds a request's head may take to arrive, from its first byte; slower connections are closed",
              Limits.requestHeadTimeoutSecondsRange, { $0.requestHeadTimeoutSeconds = $1 }),
        limit("request_body_min_bytes_per_second", "BROKER_REQUEST_BODY_MIN_BYTES_PER_SECOND",
              "a body gets request_head_timeout_seconds plus one second per this many bytes; slower connections are closed (0 = no deadline)",
              Limits.requestBodyMinBytesPerSecondRange, { $0.requestBodyMinBytesPerSecond = $1 }),
        limit("max_upstream_calls", "BROKER_MAX_UPSTREAM_CALLS", "provider calls in flight at once; beyond, 503",
              Limits.maxUpstreamCallsRange, { $0.maxUpstreamCalls = $1 }),
        limit("upstream_timeout_seconds", "BROKER_UPSTREAM_TIMEOUT_SECONDS",
              "seconds a call to a provider may take in all; beyond, 503",
              Limits.upstreamTimeoutSecondsRange, { $0.upstreamTimeoutSeconds = $1 }),
        limit("login_requests_per_minute", "BROKER_LOGIN_REQUESTS_PER_MINUTE",
              "requests to /authorize and /callback per client IP per minute (0 = no limit); beyond, 429",
              Limits.requestsPerMinuteRange, { $0.loginRequestsPerMinute = $1 }),
        limit("token_requests_per_minute", "BROKER_TOKEN_REQUESTS_PER_MINUTE",
              "codes refused at the token endpoints (invalid_grant) and device polls refused (slow_down, access_denied, expired_token) per client IP per minute (0 = no limit); beyond, 429 for that IP's codes",
              Limits.requestsPerMinuteRange, { $0.tokenRequestsPerMinute = $1 }),
        limit("refresh_requests_per_minute", "BROKER_REFRESH_REQUESTS_PER_MINUTE",
              "POST /refresh requests, and GET /token requests that would refresh, per client IP per minute (0 = no limit); beyond, 429",
              Limits.requestsPerMinuteRange, { $0.refreshRequestsPerMinute = $1 }),
        limit("device_code_entries_per_minute", "BROKER_DEVICE_CODE_ENTRIES_PER_MINUTE",
              "user codes entered at /device per client IP per minute (0 = no limit); beyond, 429",
              Limits.requestsPerMinuteRange, { $0.deviceCodeEntriesPerMinute = $1 }),
        limit("device_code_misses_per_minute", "BROKER_DEVICE_CODE_MISSES_PER_MINUTE",
              "wrong user codes entered at /device per minute from all clients together (0 = no limit); beyond, 429 for everyone",
              Limits.requestsPerMinuteRange, { $0.deviceCodeMissesPerMinute = $1 }),
        limit("max_pending_sign_ins", "BROKER_MAX_PENDING_SIGN_INS",
              "sign-ins under way at once (logins at the provider and device codes), every instance's; beyond, 503 with Retry-After",
              Limits.maxPendingSignInsRange, { $0.maxPendingSignIns = $1 }),
        limit("proxy_requests_per_minute", "BROKER_PROXY_REQUESTS_PER_MINUTE",
              "requests through the API proxy per session per minute (0 = no limit); beyond, 429",
              Limits.requestsPerMinuteRange, { $0.proxyRequestsPerMinute = $1 }),
        limit("proxy_max_response_bytes", "BROKER_PROXY_MAX_RESPONSE_BYTES",
              "largest API answer the proxy passes on; beyond, 502 (never a truncated answer)",
              Limits.proxyMaxResponseBytesRange, { $0.proxyMaxResponseBytes = $1 }),
        limit("proxy_retry_max_body_bytes", "BROKER_PROXY_RETRY_MAX_BODY_BYTES",
              "largest request body the proxy sends again after refreshing a token the API refused",
              Limits.proxyRetryMaxBodyBytesRange, { $0.proxyRetryMaxBodyBytes = $1 }),
        limit("proxy_max_transfers", "BROKER_PROXY_MAX_TRANSFERS",
              "API proxy transfers running at once (each within upstream_timeout_seconds); as many more wait, beyond that 503",
              Limits.proxyMaxTransfersRange, { $0.proxyMaxTransfers = $1 }),
        limit("proxy_max_transfers_per_session", "BROKER_PROXY_MAX_TRANSFERS_PER_SESSION",
              "API proxy transfers in flight at once for one session; beyond, 429",
              Limits.proxyMaxTransfersRange, { $0.proxyMaxTransfersPerSession = $1 }),
        limit("proxy_max_transfers_per_ip", "BROKER_PROXY_MAX_TRANSFERS_PER_IP",
              "API proxy transfers in flight at once for one client IP address; beyond, 429",
              Limits.proxyMaxTransfersRange, { $0.proxyMaxTransfersPerIP = $1 }),
        ConfigSetting(key: "server.tls_certificate_file", variable: "BROKER_TLS_CERTIFICATE_FILE",
                      description: "serve HTTPS with this PEM certificate chain (with server.tls_key_file); default: plain HTTP",
                      expected: "a file path") { draft, text in
            draft.tlsCertificateFile = text.isEmpty ? nil : text
            return .success(())
        },
        ConfigSetting(key: "server.tls_key_file", variable: "BROKER_TLS_KEY_FILE",
                      description: "the unencrypted PEM private key of the first certificate in server.tls_certificate_file",
                      expected: "a file path") { draft, text in
            draft.tlsKeyFile = text.isEmpty ? nil : text
            return .success(())
        },
        ConfigSetting(key: "webhooks.url", variable: "BROKER_WEBHOOK_URL",
                      description: "POST an event here when a session ends (invalid_grant) or its refreshes keep failing",
                      expected: "a URL") { draft, text in
            ConfigURLRules.parse(text, allowInsecureHTTP: false, allowQuery: true).map { draft.webhookURL = $0 }
        },
        ConfigSetting(key: "webhooks.failures_before_event", variable: "BROKER_WEBHOOK_FAILURES_BEFORE_EVENT",
                      description: "consecutive failed refreshes of a session before a refresh.failing event "
                          + "(\(WebhookSettings.failuresBeforeEventRange.lowerBound)...\(WebhookSettings.failuresBeforeEventRange.upperBound))",
                      expected: "an integer") { draft, text in
            ConfigValueParsing.integer(text, in: WebhookSettings.failuresBeforeEventRange).map { draft.webhookFailuresBeforeEvent = $0 }
        },
        ConfigSetting(key: "admin.listen", variable: "BROKER_ADMIN_LISTEN",
                      description: "serve the admin API on a listener of its own, HOST:PORT (off loopback only with admin.token_file); default: off, or the public listener with admin.token_file",
                      expected: "HOST:PORT") { draft, text in
            ListenAddress.parse(text).map { draft.adminListen = $0 }
        },
        ConfigSetting(key: "admin.token_file", variable: "BROKER_ADMIN_TOKEN_FILE",
                      description: "a file holding the bearer token every admin API call must carry (at least 32 characters); alone, it serves the admin API on the public listener",
                      expected: "a file path") { draft, text in
            draft.adminTokenFile = text.isEmpty ? nil : text
            return .success(())
        },
        ConfigSetting(key: "admin.metrics_only", variable: "BROKER_ADMIN_METRICS_ONLY",
                      description: "serve /metrics on the admin listener only (needs admin.listen), so that it need not be public; default false: on the public listener, and on the admin listener too when there is one",
                      expected: "true or false") { draft, text in
            ConfigValueParsing.boolean(text).map { draft.adminMetricsOnly = $0 }
        },
        ConfigSetting(key: "admin.trusted_proxies", variable: "BROKER_ADMIN_TRUSTED_PROXIES",
                      description: "reverse proxies whose X-Forwarded-For names the client on the admin listener (its audit trail's client): addresses or CIDR ranges, comma-separated; default none (server.trusted_proxies never applies there)",
                      expected: "addresses or CIDR ranges separated by commas") { draft, text in
            TrustedProxies.parse(text).map { draft.adminTrustedProxies = $0 }
        },
        ConfigSetting(key: "server.cors_origins", variable: "BROKER_CORS_ORIGINS",
                      description: "browser origins allowed to call the API (CORS), comma-separated, e.g. https://app.example.com; empty = none",
                      expected: "origins separated by commas") { draft, text in
            CORSOrigins.parse(text).map { draft.corsOrigins = $0 }
        },
        ConfigSetting(key: "server.trusted_proxies", variable: "BROKER_TRUSTED_PROXIES",
                      description: "reverse proxies whose X-Forwarded-For names the client (for rate limits and logs): addresses or CIDR ranges, comma-separated, e.g. 10.0.0.0/8; default none",
                      expected: "addresses or CIDR ranges separated by commas") { draft, text in
            TrustedProxies.parse(text).map { draft.trustedProxies = $0 }
        },
        ConfigSetting(key: "log.level", variable: "BROKER_LOG_LEVEL",
                      description: "lowest log level written: trace, debug, info, notice, warning, error, critical",
                      expected: "a log level") { draft, text in
            ConfigValueParsing.choice(text, as: LogLevel.self).map { draft.log.level = $0 }
        },
        ConfigSetting(key: "log.format", variable: "BROKER_LOG_FORMAT",
                      description: "log format: auto (JSON lines unless stdout is a terminal), json or text",
                      expected: "a log format") { draft, text in
            ConfigValueParsing.choice(text, as: LogFormat.self).map { draft.log.format = $0 }
        },
        ConfigSetting(key: "log.access", variable: "BROKER_LOG_ACCESS",
                      description: "one access-log line per request: true or false", expected: "true or false") { draft, text in
            ConfigValueParsing.boolean(text).map { draft.log.access = $0 }
        },
        seconds("sessions.idle_lifetime_seconds", "BROKER_SESSION_IDLE_LIFETIME_SECONDS",
                "seconds a session may go unused before it ends",
                SessionSettings.idleLifetimeSecondsRange, { $0.sessions.idleLifetimeSeconds = $1 }),
        seconds("sessions.absolute_lifetime_seconds", "BROKER_SESSION_ABSOLUTE_LIFETIME_SECONDS",
                "seconds a session lasts after sign-in however it is used; at least the idle lifetime",
                SessionSettings.absoluteLifetimeSecondsRange, { $0.sessions.absoluteLifetimeSeconds = $1 }),
        seconds("sessions.refresh_skew_seconds", "BROKER_REFRESH_SKEW_SECONDS",
                "GET /token refreshes an access token expiring within this many seconds",
                SessionSettings.refreshSkewSecondsRange, { $0.sessions.refreshSkewSeconds = $1 }),
        seconds("sessions.min_refresh_interval_seconds", "BROKER_MIN_REFRESH_INTERVAL_SECONDS",
                "a session's unexpired token is refreshed at the provider at most once in this many seconds "
                    + "(POST /refresh: 429 sooner; GET /token: the current token); 0 = no bound",
                SessionSettings.minRefreshIntervalSecondsRange, { $0.sessions.minRefreshIntervalSeconds = $1 }),
        seconds("sessions.profile_cache_seconds", "BROKER_PROFILE_CACHE_SECONDS",
                "seconds GET /profile answers are cached; 0 = off",
                SessionSettings.profileCacheSecondsRange, { $0.sessions.profileCacheSeconds = $1 }),
        seconds("sessions.login_lifetime_seconds", "BROKER_LOGIN_LIFETIME_SECONDS",
                "seconds from /authorize to the provider's redirect back",
                SessionSettings.loginLifetimeSecondsRange, { $0.sessions.loginLifetimeSeconds = $1 }),
        seconds("sessions.handoff_lifetime_seconds", "BROKER_HANDOFF_LIFETIME_SECONDS",
                "seconds the app has to redeem a handoff code",
                SessionSettings.handoffLifetimeSecondsRange, { $0.sessions.handoffLifetimeSeconds = $1 }),
        seconds("sessions.device_code_lifetime_seconds", "BROKER_DEVICE_CODE_LIFETIME_SECONDS",
                "seconds a device code (and its user code) can be used",
                SessionSettings.deviceCodeLifetimeSecondsRange, { $0.sessions.deviceCodeLifetimeSeconds = $1 }),
        seconds("sessions.device_poll_interval_seconds", "BROKER_DEVICE_POLL_INTERVAL_SECONDS",
                "seconds a device waits between polls at POST /token (5 more after each slow_down)",
                SessionSettings.devicePollIntervalSecondsRange, { $0.sessions.devicePollIntervalSeconds = $1 }),
        seconds("sessions.revocation_retry_seconds", "BROKER_REVOCATION_RETRY_SECONDS",
                "seconds a provider revocation the provider does not confirm is retried before it is given up (audited)",
                SessionSettings.revocationRetrySecondsRange, { $0.sessions.revocationRetrySeconds = $1 }),
        ConfigSetting(key: "state.directory", variable: "BROKER_STATE_DIR",
                      description: "directory of the encrypted snapshot and journal, relative to the working directory",
                      expected: "a directory path") { draft, text in
            guard !text.isEmpty else { return .failure(ConfigValueError("must not be empty")) }
            guard !text.contains("\0") else { return .failure(ConfigValueError("must not contain a NUL character")) }
            draft.state.directory = text
            return .success(())
        },
        seconds("state.snapshot_interval_seconds", "BROKER_SNAPSHOT_INTERVAL_SECONDS",
                "seconds between two snapshots of the state",
                StateSettings.snapshotIntervalSecondsRange, { $0.state.snapshotIntervalSeconds = $1 }),
        ConfigSetting(key: "state.journal_max_bytes", variable: nil,
                      description: "a snapshot is also taken when the journal grows past this many bytes "
                          + "(\(StateSettings.journalMaxBytesRange.lowerBound)...\(StateSettings.journalMaxBytesRange.upperBound))",
                      expected: "an integer") { draft, text in
            ConfigValueParsing.integer(text, in: StateSettings.journalMaxBytesRange).map { draft.state.journalMaxBytes = $0 }
        },
        ConfigSetting(key: "state.backend", variable: "BROKER_STATE_BACKEND",
                      description: "where the state is kept: embedded (this directory, one instance) or postgres (shared by several instances)",
                      expected: "embedded or postgres") { draft, text in
            guard let backend = StateBackend(rawValue: text) else { return .failure(ConfigValueError("must be embedded or postgres")) }
            draft.state.backend = backend
            return .success(())
        },
        ConfigSetting(key: "state.postgres.url", variable: "BROKER_POSTGRES_URL",
                      description: "PostgreSQL connection URL, postgres://USER@HOST:PORT/DATABASE?sslmode=…, without a password",
                      expected: "a URL") { draft, text in
            if let problem = PostgresSettings.urlProblem(text) { return .failure(ConfigValueError(problem)) }
            draft.state.postgres.url = text
            return .success(())
        },
        ConfigSetting(key: "state.postgres.pool_size", variable: "BROKER_POSTGRES_POOL_SIZE",
                      description: "connections each instance opens (\(PostgresSettings.poolSizeRange.lowerBound)...\(PostgresSettings.poolSizeRange.upperBound))",
                      expected: "an integer") { draft, text in
            ConfigValueParsing.integer(text, in: PostgresSettings.poolSizeRange).map { draft.state.postgres.poolSize = $0 }
        },
        ConfigSetting(key: "state.postgres.statement_timeout_seconds", variable: "BROKER_POSTGRES_STATEMENT_TIMEOUT_SECONDS",
                      description: "longest a statement may run before PostgreSQL cancels it "
                          + "(\(PostgresSettings.statementTimeoutSecondsRange.lowerBound)...\(PostgresSettings.statementTimeoutSecondsRange.upperBound))",
                      expected: "an integer") { draft, text in
            ConfigValueParsing.integer(text, in: PostgresSettings.statementTimeoutSecondsRange).map { draft.state.postgres.statementTimeoutSeconds = $0 }
        },
        ConfigSetting(key: "state.postgres.cache_sessions", variable: "BROKER_POSTGRES_CACHE_SESSIONS",
                      description: "most sessions each instance keeps in memory "
                          + "(\(PostgresSettings.cacheSessionsRange.lowerBound)...\(PostgresSettings.cacheSessionsRange.upperBound))",
                      expected: "an integer") { draft, text in
            ConfigValueParsing.integer(text, in: PostgresSettings.cacheSessionsRange).map { draft.state.postgres.cacheSessions = $0 }
        },
    ]

    /// The setting stored under `key`.
    static func named(_ key: String) -> ConfigSetting? {
        all.first { $0.key == key }
    }

    private static func seconds(_ key: String, _ variable: String, _ description: String,
                                _ range: ClosedRange<Double>,
                                _ store: @escaping @Sendable (inout ConfigDraft, Double) -> Void) -> ConfigSetting {
        let bounds = "\(ConfigValueParsing.format(range.lowerBound))...\(ConfigValueParsing.format(range.upperBound))"
        return ConfigSetting(key: key, variable: variable, description: "\(description) (\(bounds))",
                             expected: "a number") { draft, text in
            ConfigValueParsing.number(text, in: range).map { store(&draft, $0) }
        }
    }

    private static func limit(_ name: String, _ variable: String, _ description: String,
                              _ range: ClosedRange<Int>, _ store: @escaping @Sendable (inout Limits, Int) -> Void) -> ConfigSetting {
        ConfigSetting(key: "server.limits.\(name)", variable: variable,
                      description: "\(description) (\(range.lowerBound)...\(range.upperBound))",
                      expected: "an integer") { draft, text in
            ConfigValueParsing.integer(text, in: range).map { store(&draft.limits, $0) }
        }
    }
}
