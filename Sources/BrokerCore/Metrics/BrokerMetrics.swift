public import Prometheus
import Synchronization

/// The broker's Prometheus metrics, in one registry that `/metrics` renders. Every metric is
/// named `broker_*`; the README lists them.
public final class BrokerMetrics: Sendable {
    public let registry = PrometheusCollectorRegistry()
    private let inFlight: Gauge
    private let accessLogDropped: Counter
    private let logLinesDropped: [LogLineKind: Counter]
    /// The log's dropped lines already added to the counters, by kind: the log counts for itself,
    /// and `/metrics` adds what it counted since.
    private let droppedLogTotals = Mutex<[LogLineKind: Int]>([:])
    /// The `process_*` metrics, read at each render: one for the process, as its CPU counter
    /// keeps what it has counted.
    let process: ProcessMetrics
    private let pendingRevocations: Gauge
    /// The per-request counter and histogram by route, method and status, made once: looking
    /// them up in the registry on every request costs more than the request itself.
    private let requestMetrics = Mutex<[RequestKey: (Counter, DurationHistogram)]>([:])
    /// The same for the API proxy's requests, by provider and status class.
    private let proxyMetrics = Mutex<[ProxyKey: (Counter, DurationHistogram)]>([:])
    /// The outbound connection counts already added to the counters, by client: the HTTP clients
    /// count for themselves, and `/metrics` adds what they counted since.
    private let connectionTotals = Mutex<[String: (opened: Int, reused: Int)]>([:])

    private struct RequestKey: Hashable {
        let route: String
        let method: String
        let status: Int
    }

    private struct ProxyKey: Hashable {
        let provider: String
        let statusClass: Int
    }

    /// Latency buckets from 0.5 ms (an answer from memory) to 10 s (a slow provider).
    private static let latencyBuckets: [Duration] = [
        .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
        .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
        .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
    ]
    private static let upstreamBuckets: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
    ]
    private static let snapshotBuckets: [Duration] = [
        .milliseconds(10), .milliseconds(100), .milliseconds(500), .seconds(1), .seconds(3), .seconds(10), .seconds(30),
    ]
    private static let commitBuckets: [Duration] = [
        .microseconds(100), .microseconds(500), .milliseconds(1), .milliseconds(5), .milliseconds(20), .milliseconds(100), .seconds(1),
    ]

    public init() {
        process = ProcessMetrics(registry: registry)
        inFlight = registry.makeGauge(descriptor: Self.name("http_requests_in_flight", help: "Requests received and not yet answered."))
        accessLogDropped = registry.makeCounter(descriptor: Self.name(
            "access_log_dropped", unit: "total", help: "Access-log lines dropped because the log's buffer was full (its output too slow) or its output failed (closed)."
        ))
        let droppedLines = Self.name(
            "log_lines_dropped", unit: "total",
            help: "Log lines other than access-log lines dropped because the log's buffer was full (its output too slow) or its output failed (closed), by kind: event, audit."
        )
        logLinesDropped = [
            .event: registry.makeCounter(descriptor: droppedLines, labels: [("kind", "event")]),
            .audit: registry.makeCounter(descriptor: droppedLines, labels: [("kind", "audit")]),
        ]
        pendingRevocations = registry.makeGauge(descriptor: Self.name(
            "provider_revocations_pending", help: "Revocations queued for providers and not confirmed yet, every instance's."
        ))
    }

    /// The log's lines of `kind` dropped so far (``LogOutput/dropped(_:)``; set when `/metrics` is
    /// rendered, so that a request that drops a line touches nothing shared but the log's count).
    func logLinesDropped(_ kind: LogLineKind, total: Int) {
        let newly = droppedLogTotals.withLock { totals in
            defer { totals[kind] = total }
            return total - (totals[kind] ?? 0)
        }
        guard newly > 0 else { return }
        (kind == .access ? accessLogDropped : logLinesDropped[kind])?.increment(by: Int64(newly))
    }

    func requestFinished(route: String, method: String, status: Int, seconds: Double) {
        let (counter, histogram) = Self.made(in: requestMetrics, for: RequestKey(route: route, method: method, status: status)) {
            (
                registry.makeCounter(
                    descriptor: Self.name("http_requests", unit: "total", help: "Requests answered, by route, method and status."),
                    labels: [("route", route), ("method", method), ("status", String(status))]
                ),
                registry.makeDurationHistogram(
                    descriptor: Self.name("http_request_duration", unit: "seconds", help: "Time from the request line to the answer, by route."),
                    labels: [("route", route)], buckets: Self.latencyBuckets
                )
            )
        }
        counter.increment()
        histogram.recordNanoseconds(Int64(seconds * 1e9))
    }

    /// The pair cached under `key`, made on first use.
    private static func made<Key: Hashable & Sendable>(in cache: borrowing Mutex<[Key: (Counter, DurationHistogram)]>, for key: Key,
                                            _ make: () -> (Counter, DurationHistogram)) -> (Counter, DurationHistogram) {
        cache.withLock { cache in
            if let known = cache[key] { return known }
            let made = make()
            cache[key] = made
            return made
        }
    }

    /// One upstream refresh and how it ended: `refreshed`, `login_required` (the provider
    /// refused the grant) or `failed` (transient).
    func refreshFinished(provider: String, outcome: String) {
        count("refreshes", "Upstream token refreshes, by provider and outcome.", [("provider", provider), ("outcome", outcome)])
    }

    /// A request refused for abuse-related reasons: rate limits, unknown session tokens, unknown
    /// or replayed handoff codes, wrong verifiers — guessing shows up here.
    func rejected(route: String, reason: String) {
        count("rejected_requests", "Requests refused by rate limits or for unknown or misused credentials, by route and reason.",
              [("route", route), ("reason", reason)])
    }

    /// An audit event (``AuditTrail``): an admin action, a provider's sign-out, or a refusal of
    /// either, by its action name.
    func auditEvent(action: String) {
        count("audit_events", "Audit events by action: admin actions, provider sign-outs (back-channel logout), and their refusals.",
              [("action", action)])
    }

    /// A webhook delivery attempt's outcome: `delivered`, `retried`, `failed` or `dropped`.
    func webhookDelivery(outcome: String) {
        count("webhook_deliveries", "Webhook events by delivery outcome.", [("outcome", outcome)])
    }

    /// One call to a provider (`token`, `refresh`, `revoke`, `userinfo`) and its duration.
    func upstreamCall(provider: String, endpoint: String, seconds: Double) {
        time("upstream_request_duration", "Calls to providers, by provider and endpoint.",
             [("provider", provider), ("endpoint", endpoint)], Self.upstreamBuckets, seconds)
    }

    /// A call to a provider's endpoint ended: `outcome` is the answer's status class (`2xx`,
    /// `4xx`, `5xx`, …) or why there was none (``UpstreamError/outcome``).
    func upstreamRequest(provider: String, endpoint: String, outcome: String) {
        count("upstream_requests", "Calls to providers, by provider, endpoint and outcome: the status class, or timed_out, unreachable, too_large, tls, busy.",
              [("provider", provider), ("endpoint", endpoint), ("outcome", outcome)])
    }

    /// The counters an operator alerts on, at zero for each configured provider from the start,
    /// so that a rate over them exists before the first event.
    func start(providers: [String]) {
        for provider in providers {
            for outcome in ["started", "completed", "denied", "failed"] {
                _ = registry.makeCounter(descriptor: Self.name("logins", unit: "total", help: "Logins by provider and outcome: started, completed, denied, failed."),
                                     labels: [("provider", provider), ("outcome", outcome)])
            }
            for outcome in ["refreshed", "login_required", "failed"] {
                _ = registry.makeCounter(descriptor: Self.name("refreshes", unit: "total", help: "Upstream token refreshes, by provider and outcome."),
                                     labels: [("provider", provider), ("outcome", outcome)])
            }
            // What the alerts on revocations count (deploy/monitoring): from zero, so that a
            // rate sees the first.
            _ = counter("provider_revocations_failed", Self.revocationsFailedHelp, [("provider", provider)])
            _ = counter("provider_revocations_abandoned", Self.revocationsAbandonedHelp, [("provider", provider)])
        }
    }

    /// The build: `broker_build_info{version,commit} 1`.
    func build(version: String, commit: String) {
        registry.makeGauge(descriptor: Self.name("build_info", help: "The broker's build, in its labels; always 1."),
                           labels: [("version", version), ("commit", commit)]).set(Double(1))
    }

    /// A step of a login: `started` (/authorize), `completed` (handoff code issued), `denied`
    /// (the user or provider said no), `failed` (anything else).
    func login(provider: String, outcome: String) {
        count("logins", "Logins by provider and outcome: started, completed, denied, failed.", [("provider", provider), ("outcome", outcome)])
    }

    /// A handoff code redemption: `redeemed`, `replayed`, `unknown` or `rejected`.
    func handoffRedemption(outcome: String) {
        count("handoff_redemptions", "POST /token handoff code redemptions by outcome.", [("outcome", outcome)])
    }

    /// A device code's step (RFC 8628): `issued`, `signed_in` (at the provider), `approved` (the
    /// account confirmed), `denied`, `expired` (polled after its lifetime), `polled` (each poll),
    /// `collected` (the device got its session).
    func deviceCode(outcome: String) {
        count("device_codes", "Device code steps: issued, signed_in, approved, denied, expired, polled, collected.", [("outcome", outcome)])
    }

    /// A user code typed at `/device`: `found`, `unknown`, `malformed` or `rate_limited`; `slowed`
    /// counts those answered slowly first (``UserCodeGuard``), which are then counted again.
    func userCodeEntry(outcome: String) {
        count("device_user_code_entries", "User codes entered at /device, by outcome: found, unknown, malformed, rate_limited; slowed (also counted by their outcome).",
              [("outcome", outcome)])
    }

    /// A request through the API proxy: its status class and time, by provider.
    func proxyRequest(provider: String, status: Int, seconds: Double) {
        let (counter, histogram) = Self.made(in: proxyMetrics, for: ProxyKey(provider: provider, statusClass: status / 100)) {
            (
                registry.makeCounter(
                    descriptor: Self.name("proxy_requests", unit: "total", help: "Requests through the API proxy, by provider and status class."),
                    labels: [("provider", provider), ("status_class", "\(status / 100)xx")]
                ),
                registry.makeDurationHistogram(
                    descriptor: Self.name("proxy_request_duration", unit: "seconds", help: "Time of requests through the API proxy, by provider."),
                    labels: [("provider", provider)], buckets: Self.upstreamBuckets
                )
            )
        }
        counter.increment()
        histogram.recordNanoseconds(Int64(seconds * 1e9))
    }

    /// A `POST /introspect`: `active`, `inactive`, `unauthenticated` or `rate_limited`.
    func introspection(outcome: String) {
        count("introspections", "POST /introspect answers by outcome: active, inactive, unauthenticated, rate_limited.", [("outcome", outcome)])
    }

    /// A write to the state directory failed: `journal` (a group commit, after its retries) or
    /// `snapshot`. Both start at zero with the embedded store (``stateDirectoryOpened()``).
    func stateWriteFailed(file: String) {
        stateWriteFailures(file).increment()
    }

    func stateDirectoryOpened() {
        for file in ["journal", "snapshot"] { _ = stateWriteFailures(file) }
    }

    private func stateWriteFailures(_ file: String) -> Counter {
        registry.makeCounter(descriptor: Self.name("state_write_failures", unit: "total",
                                                   help: "Failed writes to the state directory, by file: journal or snapshot."),
                             labels: [("file", file)])
    }

    /// A snapshot was written.
    func snapshotWritten(seconds: Double, bytes: Int) {
        time("snapshot_duration", "Time to write a snapshot of the whole state.", [], Self.snapshotBuckets, seconds)
        registry.makeGauge(descriptor: Self.name("snapshot_size", unit: "bytes", help: "Size of the last snapshot.")).set(Double(bytes))
    }

    /// One journal group commit (write + fdatasync), however many changes it carried.
    func journalCommitted(seconds: Double) {
        time("journal_commit_duration", "Time of one journal group commit (write and fdatasync).", [], Self.commitBuckets, seconds)
    }

    /// One call to the PostgreSQL store (`read`: a statement; `write`: a transaction), and
    /// whether the database was reachable.
    func stateStoreCall(_ operation: String, seconds: Double, reachable: Bool) {
        time("state_store_call_duration", "Time of one call to the PostgreSQL store, by operation (read, write).",
             [("operation", operation)], Self.commitBuckets, seconds)
        if !reachable { count("state_store_unreachable", Self.unreachableHelp, []) }
    }

    /// The PostgreSQL store is in use: its unreachable calls are counted from zero.
    func stateStoreOpened() {
        _ = counter("state_store_unreachable", Self.unreachableHelp, [])
    }

    private static let unreachableHelp = "Calls to the PostgreSQL store that found it out of reach."
    private static let revocationsFailedHelp = "Deliveries of queued revocations the provider did not confirm, by provider."
    private static let revocationsAbandonedHelp = "Queued revocations given up unconfirmed, by provider."

    /// Time a refresh waited for its session's lock (held by another instance, or free).
    func refreshLockWaited(seconds: Double) {
        time("refresh_lock_wait", "Time a refresh waited for its session's refresh lock in PostgreSQL.", [], Self.upstreamBuckets, seconds)
    }

    /// How long after its commit on one instance a change to a session reached this one's
    /// cache (by the two instances' clocks).
    func notificationArrived(lagSeconds: Double) {
        time("state_store_notification_lag", "Time from a session change's commit on any instance to its notification here.",
             [], Self.commitBuckets, max(0, lagSeconds))
    }

    /// The PostgreSQL store's sessions in this instance's memory, and its calls waiting for or
    /// holding a connection (set every second).
    func stateStoreInUse(cachedSessions: Int, callsInFlight: Int) {
        registry.makeGauge(descriptor: Self.name("session_cache_entries", help: "Sessions the PostgreSQL store keeps in this instance's memory."))
            .set(Double(cachedSessions))
        registry.makeGauge(descriptor: Self.name("state_store_calls_in_flight", help: "Calls to the PostgreSQL store waiting for or holding a connection."))
            .set(Double(callsInFlight))
    }

    /// A grant left the broker (``GrantEndings``): why, and what held it.
    func grantEnded(reason: String, heldBy: String) {
        count("sessions_ended", "Sessions, and grants on their way to one (held by a handoff or device code), ended by reason.",
              [("reason", reason), ("held_by", heldBy)])
    }

    /// Revocations waiting in the queue, every instance's (set after each round of deliveries).
    func revocationsPending(_ count: Int) {
        pendingRevocations.set(Double(count))
    }

    /// A delivery of a queued revocation: `succeeded`, `not_supported`, or `queued` (not
    /// confirmed: tried again later), which also counts as failed.
    func revocationDelivered(provider: String, outcome: String) {
        count("provider_revocation_deliveries", "Deliveries of queued revocations to providers, by provider and outcome.",
              [("provider", provider), ("outcome", outcome)])
        if outcome == ProviderRevocation.queued.rawValue {
            count("provider_revocations_failed", Self.revocationsFailedHelp, [("provider", provider)])
        }
    }

    /// A revocation still unconfirmed past its time was given up (and audited).
    func revocationAbandoned(provider: String) {
        count("provider_revocations_abandoned", Self.revocationsAbandonedHelp, [("provider", provider)])
    }

    /// Sign-ins under way, every instance's, as this instance last knew them (``SignInCeiling``).
    func pendingSignIns(_ count: Int) {
        registry.makeGauge(descriptor: Self.name(
            "pending_sign_ins", help: "Sign-ins under way (logins at the provider, device codes), every instance's, as of the last one started here."
        )).set(Double(count))
    }

    /// Live sessions now (set when `/metrics` is rendered).
    func sessions(_ count: Int) {
        registry.makeGauge(descriptor: Self.name("sessions", help: "Live sessions.")).set(Double(count))
    }

    /// What an outbound HTTP client's calls (`client`: `api_proxy`, `providers`) did with
    /// connections so far, and how many it holds open now (set when `/metrics` is rendered).
    func upstreamConnections(client: String, opened: Int, reused: Int, open: Int) {
        let (newlyOpened, newlyReused) = connectionTotals.withLock { totals in
            let before = totals[client] ?? (0, 0)
            totals[client] = (opened, reused)
            return (opened - before.opened, reused - before.reused)
        }
        let labels = [("client", client)]
        registry.makeCounter(descriptor: Self.name("upstream_connections_opened", unit: "total", help:
            "Connections opened to providers and APIs (each a TCP and, for https, a TLS handshake), by client."), labels: labels)
            .increment(by: Int64(newlyOpened))
        registry.makeCounter(descriptor: Self.name("upstream_connections_reused", unit: "total", help:
            "Calls to providers and APIs answered on a connection kept from an earlier one, by client."), labels: labels)
            .increment(by: Int64(newlyReused))
        registry.makeGauge(descriptor: Self.name("upstream_connections_open", help:
            "Connections to providers and APIs open now, kept for reuse or in use, by client."), labels: labels).set(Double(open))
    }

    /// Requests in flight now, as the server counts them (set when `/metrics` is rendered, so
    /// that requests do not contend for a shared gauge).
    func requestsInFlight(_ count: Int) {
        inFlight.set(Double(count))
    }

    /// The Prometheus text exposition of every metric.
    public func render() -> [UInt8] {
        registry.emitToBuffer()
    }

    private func count(_ name: String, _ help: String, _ labels: [(String, String)]) {
        counter(name, help, labels).increment()
    }

    private func counter(_ name: String, _ help: String, _ labels: [(String, String)]) -> Counter {
        registry.makeCounter(descriptor: Self.name(name, unit: "total", help: help), labels: labels)
    }

    private func time(_ name: String, _ help: String, _ labels: [(String, String)], _ buckets: [Duration], _ seconds: Double) {
        let descriptor = Self.name(name, unit: "seconds", help: help)
        let histogram = labels.isEmpty
            ? registry.makeDurationHistogram(descriptor: descriptor, buckets: buckets)
            : registry.makeDurationHistogram(descriptor: descriptor, labels: labels, buckets: buckets)
        histogram.recordNanoseconds(Int64(seconds * 1e9))
    }

    private static func name(_ metric: String, unit: String = "", help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "broker", metricName: metric, unitName: unit, helpText: help)
    }
}
