import HTTPServer
import WireValues

/// `/healthz`, `/readyz` and `/metrics`: for orchestrators and Prometheus. `/metrics` is on the
/// public listener unless `admin.metrics_only`, and on the admin listener when there is one.
struct OperationsRoutes: Sendable {
    let readiness: Readiness
    let metrics: BrokerMetrics
    let liveSessions: @Sendable () -> Int
    let requestsInFlight: @Sendable () -> Int
    /// The outbound HTTP clients' connection counts, by client name.
    let connections: @Sendable () -> [(client: String, opened: Int, reused: Int, open: Int)]
    /// The log's lines dropped so far, by kind.
    let droppedLogLines: @Sendable (LogLineKind) -> Int

    /// A probe's or a scraper's: answered from memory, nothing in it a secret.
    static let policy = RoutePolicy(caller: .monitor, limit: .none(because: "answered from memory, for probes and scrapers"), body: .none)

    func register(in routes: inout RouteTable, metrics withMetrics: Bool) {
        routes.add("GET", "/healthz", Self.policy) { _ in
            .now(.json(.object([("status", .string("ok"))])))
        }
        routes.add("GET", "/readyz", Self.policy) { [readiness] _ in
            readiness.reply()
        }
        if withMetrics { registerMetrics(in: &routes) }
    }

    func registerMetrics(in routes: inout RouteTable) {
        routes.add("GET", "/metrics", Self.policy) { [metrics, liveSessions, requestsInFlight, connections, droppedLogLines] _ in
            metrics.sessions(liveSessions())
            metrics.requestsInFlight(requestsInFlight())
            for counts in connections() {
                metrics.upstreamConnections(client: counts.client, opened: counts.opened, reused: counts.reused, open: counts.open)
            }
            for kind in LogLineKind.allCases {
                metrics.logLinesDropped(kind, total: droppedLogLines(kind))
            }
            metrics.process.update()
            return .now(Response(
                status: 200,
                headers: [HTTPHeader("Content-Type", "text/plain; version=0.0.4")],
                body: metrics.render()
            ))
        }
    }
}
