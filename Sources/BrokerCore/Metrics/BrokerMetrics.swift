public import Prometheus

/// The broker's Prometheus metrics, in one registry that `/metrics` renders.
public final class BrokerMetrics: Sendable {
    public let registry = PrometheusCollectorRegistry()
    private let inFlight: Gauge

    /// Latency buckets from 0.5 ms (an answer from memory) to 10 s (a slow provider).
    private static let latencyBuckets: [Duration] = [
        .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
        .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
        .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
    ]

    public init() {
        inFlight = registry.makeGauge(descriptor: MetricNameDescriptor(
            namespace: "broker", metricName: "http_requests_in_flight", unitName: "",
            helpText: "Requests received and not yet answered."
        ))
    }

    func requestStarted() {
        inFlight.increment()
    }

    func requestFinished(route: String, method: String, status: Int, seconds: Double) {
        inFlight.decrement()
        registry.makeCounter(
            descriptor: MetricNameDescriptor(
                namespace: "broker", metricName: "http_requests", unitName: "total",
                helpText: "Requests answered, by route, method and status."
            ),
            labels: [("route", route), ("method", method), ("status", String(status))]
        ).increment()
        registry.makeDurationHistogram(
            descriptor: MetricNameDescriptor(
                namespace: "broker", metricName: "http_request_duration", unitName: "seconds",
                helpText: "Time from the request line to the answer, by route."
            ),
            labels: [("route", route)],
            buckets: Self.latencyBuckets
        ).recordNanoseconds(Int64(seconds * 1e9))
    }

    /// One upstream refresh and how it ended: `refreshed`, `login_required` (the provider
    /// refused the grant), `failed` (transient) or `unsaved`.
    func refreshFinished(provider: String, outcome: String) {
        registry.makeCounter(
            descriptor: MetricNameDescriptor(
                namespace: "broker", metricName: "refreshes", unitName: "total",
                helpText: "Upstream token refreshes, by provider and outcome."
            ),
            labels: [("provider", provider), ("outcome", outcome)]
        ).increment()
    }

    /// A request refused for abuse-related reasons: rate limits, unknown session tokens, unknown
    /// or replayed handoff codes, wrong verifiers — guessing shows up here.
    func rejected(route: String, reason: String) {
        registry.makeCounter(
            descriptor: MetricNameDescriptor(
                namespace: "broker", metricName: "rejected_requests", unitName: "total",
                helpText: "Requests refused by rate limits or for unknown or misused credentials, by route and reason."
            ),
            labels: [("route", route), ("reason", reason)]
        ).increment()
    }

    /// A webhook delivery attempt's outcome: `delivered`, `retried`, `failed` or `dropped`.
    func webhookDelivery(outcome: String) {
        registry.makeCounter(
            descriptor: MetricNameDescriptor(
                namespace: "broker", metricName: "webhook_deliveries", unitName: "total",
                helpText: "Webhook events by delivery outcome."
            ),
            labels: [("outcome", outcome)]
        ).increment()
    }

    private static let upstreamBuckets: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
    ]

    /// One call to a provider (`token`, `refresh`, `revoke`, `userinfo`) and its duration.
    func upstreamCall(provider: String, endpoint: String, seconds: Double) {
        registry.makeDurationHistogram(
            descriptor: MetricNameDescriptor(
                namespace: "broker", metricName: "upstream_request_duration", unitName: "seconds",
                helpText: "Calls to providers, by provider and endpoint."
            ),
            labels: [("provider", provider), ("endpoint", endpoint)],
            buckets: Self.upstreamBuckets
        ).recordNanoseconds(Int64(seconds * 1e9))
    }

    /// A step of a login: `started` (/authorize), `completed` (handoff code issued), `denied`
    /// (the user or provider said no), `failed` (anything else).
    func login(provider: String, outcome: String) {
        registry.makeCounter(
            descriptor: MetricNameDescriptor(
                namespace: "broker", metricName: "logins", unitName: "total",
                helpText: "Logins by provider and outcome: started, completed, denied, failed."
            ),
            labels: [("provider", provider), ("outcome", outcome)]
        ).increment()
    }

    /// A handoff code redemption: `redeemed`, `replayed`, `unknown` or `rejected`.
    func handoffRedemption(outcome: String) {
        registry.makeCounter(
            descriptor: MetricNameDescriptor(
                namespace: "broker", metricName: "handoff_redemptions", unitName: "total",
                helpText: "POST /token handoff code redemptions by outcome."
            ),
            labels: [("outcome", outcome)]
        ).increment()
    }

    /// A snapshot was written.
    func snapshotWritten(seconds: Double, bytes: Int) {
        registry.makeDurationHistogram(
            descriptor: MetricNameDescriptor(
                namespace: "broker", metricName: "snapshot_duration", unitName: "seconds",
                helpText: "Time to write a snapshot of the whole state."
            ),
            buckets: [.milliseconds(10), .milliseconds(100), .milliseconds(500), .seconds(1), .seconds(3), .seconds(10), .seconds(30)]
        ).recordNanoseconds(Int64(seconds * 1e9))
        registry.makeGauge(descriptor: MetricNameDescriptor(
            namespace: "broker", metricName: "snapshot_size", unitName: "bytes", helpText: "Size of the last snapshot."
        )).set(Double(bytes))
    }

    /// One journal group commit (write + fdatasync), however many changes it carried.
    func journalCommitted(seconds: Double) {
        registry.makeDurationHistogram(
            descriptor: MetricNameDescriptor(
                namespace: "broker", metricName: "journal_commit_duration", unitName: "seconds",
                helpText: "Time of one journal group commit (write and fdatasync)."
            ),
            buckets: [.microseconds(100), .microseconds(500), .milliseconds(1), .milliseconds(5), .milliseconds(20), .milliseconds(100), .seconds(1)]
        ).recordNanoseconds(Int64(seconds * 1e9))
    }

    /// Live sessions now (set when `/metrics` is rendered).
    func sessions(_ count: Int) {
        registry.makeGauge(descriptor: MetricNameDescriptor(
            namespace: "broker", metricName: "sessions", unitName: "", helpText: "Live sessions."
        )).set(Double(count))
    }

    /// The Prometheus text exposition of every metric.
    public func render() -> [UInt8] {
        registry.emitToBuffer()
    }
}
