/// Bounds on what one request or one client may use: the `server.limits` section.
public struct Limits: Sendable, Equatable {
    /// Largest request body accepted, in bytes (413 above it).
    public var maxBodyBytes: Int
    /// Largest total size of the request headers, in bytes (431 above it).
    public var maxHeaderBytes: Int
    /// Longest request target (path and query), in bytes (414 above it).
    public var maxURLBytes: Int
    /// Most connections open at once.
    public var maxConnections: Int
    /// Most connections open at once from one client IP address.
    public var maxConnectionsPerIP: Int
    /// Seconds an idle connection is kept open.
    public var idleTimeoutSeconds: Int
    /// Seconds a request head may take to arrive (from the connection's opening or the end of
    /// its previous request); a body gets as long plus a second per `requestBodyMinBytesPerSecond`.
    public var requestHeadTimeoutSeconds: Int
    /// The rate a request body must keep up, in bytes per second (0 = bodies have no deadline).
    public var requestBodyMinBytesPerSecond: Int
    /// Provider calls in flight at once; requests needing one more get 503.
    public var maxUpstreamCalls: Int
    /// Seconds a provider call may take in all (connecting: at most half of it).
    public var upstreamTimeoutSeconds: Int
    /// Requests to `/authorize` and `/callback` per client IP per minute (0 = no limit); 429 above.
    public var loginRequestsPerMinute: Int
    /// Codes (handoff and device) refused as `invalid_grant`, and device polls refused (`slow_down`,
    /// `access_denied`, `expired_token`), at the token endpoints per client IP per minute (0 = no
    /// limit); past it, that IP's codes are refused with 429 (`GrantLimit`).
    public var tokenRequestsPerMinute: Int
    /// `POST /refresh` requests, and `GET /token` requests that would refresh, per client IP per
    /// minute (0 = no limit); 429 above.
    public var refreshRequestsPerMinute: Int
    /// User codes entered at `/device` per client IP per minute (0 = no limit); 429 above.
    public var deviceCodeEntriesPerMinute: Int
    /// Wrong user codes entered at `/device` per minute, all clients together (0 = no limit):
    /// bounds how many codes a distributed guesser can try; 429 for everyone above.
    public var deviceCodeMissesPerMinute: Int
    /// Sign-ins under way at once — logins at the provider's page and device codes, every
    /// instance's — which anyone can start; 503 with `Retry-After` above (``SignInCeiling``).
    public var maxPendingSignIns: Int
    /// Requests through the API proxy per session per minute (0 = no limit); 429 above.
    public var proxyRequestsPerMinute: Int
    /// Largest API answer the proxy passes on, in bytes; 502 above (never a truncated answer).
    public var proxyMaxResponseBytes: Int
    /// Largest request body the proxy keeps to send again after refreshing a refused token.
    public var proxyRetryMaxBodyBytes: Int
    /// API proxy transfers running at once; as many more may wait for one to end, beyond that 503.
    public var proxyMaxTransfers: Int
    /// API proxy transfers in flight at once for one session; 429 above.
    public var proxyMaxTransfersPerSession: Int
    /// API proxy transfers in flight at once for one client IP address; 429 above.
    public var proxyMaxTransfersPerIP: Int

    /// Creates limits; the defaults are those of the embedded configuration.
    public init(maxBodyBytes: Int = 65_536, maxHeaderBytes: Int = 8_192, maxURLBytes: Int = 4_096,
                maxConnections: Int = 1_024, maxConnectionsPerIP: Int = 128, idleTimeoutSeconds: Int = 30,
                requestHeadTimeoutSeconds: Int = 10, requestBodyMinBytesPerSecond: Int = 1_024,
                maxUpstreamCalls: Int = 256, upstreamTimeoutSeconds: Int = 10,
                loginRequestsPerMinute: Int = 120, tokenRequestsPerMinute: Int = 120,
                refreshRequestsPerMinute: Int = 120, deviceCodeEntriesPerMinute: Int = 10,
                deviceCodeMissesPerMinute: Int = 60, maxPendingSignIns: Int = 50_000, proxyRequestsPerMinute: Int = 600,
                proxyMaxResponseBytes: Int = 10_485_760, proxyRetryMaxBodyBytes: Int = 65_536,
                proxyMaxTransfers: Int = 128, proxyMaxTransfersPerSession: Int = 32, proxyMaxTransfersPerIP: Int = 64) {
        self.maxBodyBytes = maxBodyBytes
        self.maxHeaderBytes = maxHeaderBytes
        self.maxURLBytes = maxURLBytes
        self.maxConnections = maxConnections
        self.maxConnectionsPerIP = maxConnectionsPerIP
        self.idleTimeoutSeconds = idleTimeoutSeconds
        self.requestHeadTimeoutSeconds = requestHeadTimeoutSeconds
        self.requestBodyMinBytesPerSecond = requestBodyMinBytesPerSecond
        self.maxUpstreamCalls = maxUpstreamCalls
        self.upstreamTimeoutSeconds = upstreamTimeoutSeconds
        self.loginRequestsPerMinute = loginRequestsPerMinute
        self.tokenRequestsPerMinute = tokenRequestsPerMinute
        self.refreshRequestsPerMinute = refreshRequestsPerMinute
        self.deviceCodeEntriesPerMinute = deviceCodeEntriesPerMinute
        self.deviceCodeMissesPerMinute = deviceCodeMissesPerMinute
        self.maxPendingSignIns = maxPendingSignIns
        self.proxyRequestsPerMinute = proxyRequestsPerMinute
        self.proxyMaxResponseBytes = proxyMaxResponseBytes
        self.proxyRetryMaxBodyBytes = proxyRetryMaxBodyBytes
        self.proxyMaxTransfers = proxyMaxTransfers
        self.proxyMaxTransfersPerSession = proxyMaxTransfersPerSession
        self.proxyMaxTransfersPerIP = proxyMaxTransfersPerIP
    }

    /// Accepted range of `max_body_bytes`: 1 KiB to 64 MiB.
    static let maxBodyBytesRange = 1_024...67_108_864
    /// Accepted range of `max_header_bytes`: 1 KiB to 1 MiB.
    static let maxHeaderBytesRange = 1_024...1_048_576
    /// Accepted range of `max_url_bytes`: 256 bytes to 1 MiB.
    static let maxURLBytesRange = 256...1_048_576
    /// Accepted range of `max_connections`.
    static let maxConnectionsRange = 1...1_000_000
    /// Accepted range of `max_connections_per_ip` (also at most `max_connections`).
    static let maxConnectionsPerIPRange = 1...1_000_000
    /// Accepted range of `idle_timeout_seconds`: one second to one day.
    static let idleTimeoutSecondsRange = 1...86_400
    /// Accepted range of `request_head_timeout_seconds`: one second to an hour.
    static let requestHeadTimeoutSecondsRange = 1...3_600
    /// Accepted range of `request_body_min_bytes_per_second`: off, or up to 1 GiB per second.
    static let requestBodyMinBytesPerSecondRange = 0...1_073_741_824
    static let maxUpstreamCallsRange = 1...100_000
    static let upstreamTimeoutSecondsRange = 1...300
    static let requestsPerMinuteRange = 0...1_000_000
    /// Accepted range of `max_pending_sign_ins`.
    static let maxPendingSignInsRange = 100...10_000_000
    /// Accepted range of `proxy_max_response_bytes`: 1 KiB to 1 GiB.
    static let proxyMaxResponseBytesRange = 1_024...1_073_741_824
    /// Accepted range of `proxy_retry_max_body_bytes`: none kept, up to 64 MiB.
    static let proxyRetryMaxBodyBytesRange = 0...67_108_864
    /// Accepted range of `proxy_max_transfers` and its per-session and per-IP bounds.
    static let proxyMaxTransfersRange = 1...4_096
}
