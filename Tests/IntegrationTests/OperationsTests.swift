import Foundation
import Testing
import TestWaiting

/// The real binary on a free port: operations endpoints, headers, metrics, the access log.
@Suite(.serialized)
struct OperationsTests {
    @Test func healthzAnswersWithStandardHeaders() throws {
        let broker = try BrokerProcess()
        let response = try broker.get("/healthz", headers: ["X-Request-Id": "trace-123"])
        #expect(response.status == 200)
        #expect(try response.json()["status"] as? String == "ok")
        #expect(response.headers["content-type"] == "application/json")
        #expect(response.headers["cache-control"] == "no-store")
        #expect(response.headers["x-content-type-options"] == "nosniff")
        #expect(response.headers["x-request-id"] == "trace-123")
        let generated = try broker.get("/healthz").headers["x-request-id"] ?? ""
        #expect(!generated.isEmpty && generated != "trace-123")
        let complaints = broker.jsonLines.filter { ["warning", "error", "critical"].contains($0["level"] as? String) }
        #expect(complaints.isEmpty, "a clean start logs no warnings: \(complaints)")
    }

    @Test func metricsCountRequestsByRouteAndStatus() throws {
        let broker = try BrokerProcess()
        for _ in 0..<3 { _ = try broker.get("/healthz") }
        _ = try broker.get("/no-such-path")
        _ = try RawHTTP.request(port: broker.port, method: "BREW", target: "/healthz")
        let metrics = try broker.get("/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
        let text = metrics.text
        #expect(text.contains(#"broker_http_requests_total{route="/healthz",method="GET",status="200"} 3"#))
        #expect(text.contains(#"broker_http_requests_total{route="unmatched",method="GET",status="404"} 1"#))
        #expect(text.contains(#"broker_http_request_duration_seconds_count{route="/healthz"} 4"#))
        // Client-chosen methods are not labels: they would grow the metrics without bound.
        #expect(text.contains(#"broker_http_requests_total{route="/healthz",method="OTHER",status="405"} 1"#))
        #expect(!text.contains("BREW"))
        // The /metrics request itself is in flight while it renders. A request whose answer the
        // client already has may still be finishing on another server thread: ask again until it
        // has (a count that never comes back to 1 leaks).
        func inFlight(_ text: String) -> Double? {
            text.split(separator: "\n").first { $0.hasPrefix("broker_http_requests_in_flight ") }
                .flatMap { Double($0.split(separator: " ")[1]) }
        }
        var count = inFlight(text)
        try waitUntilBlocking("the requests in flight come back to this one") {
            if count == 1 { return true }
            count = inFlight(try broker.get("/metrics").text)
            return count == 1
        }
    }

    /// `process_cpu_seconds_total` is the process's CPU time, however often it is scraped.
    @Test func theCPUCounterIsTheProcesssCPUTime() throws {
        let broker = try BrokerProcess()
        func counted() throws -> Double? {
            try broker.get("/metrics").text.split(separator: "\n").first { $0.hasPrefix("process_cpu_seconds_total ") }
                .flatMap { Double($0.split(separator: " ")[1]) }
        }
        var last = 0.0
        for _ in 0..<8 { last = try #require(try counted()) }
        let stat = try String(contentsOfFile: "/proc/\(broker.process.processIdentifier)/stat", encoding: .utf8)
        let fields = stat[stat.index(after: try #require(stat.lastIndex(of: ")")))...].split(separator: " ")
        let used = (Double(fields[11]) ?? 0) / 100 + (Double(fields[12]) ?? 0) / 100
        #expect(last <= used + 0.02, "scraped \(last) s of CPU, the process used \(used) s")
    }

    @Test func readyWithoutProvidersToCheck() throws {
        let broker = try BrokerProcess()
        let response = try broker.get("/readyz")
        #expect(response.status == 200)
        #expect(try response.json()["status"] as? String == "ready")
    }

    /// A provider every instance shares is down: the instance stays ready (a Service keeps its
    /// endpoints), and `/readyz` says what is wrong as a warning; the log says it once. The
    /// documents are fetched from the start, in the background.
    @Test func readyzFetchesDiscoveryAndWarnsOfFailures() throws {
        let provider = try SlowProvider(delay: 0)
        let broker = try BrokerProcess(config: Fixtures.config(issuer: provider.issuer, missingIssuer: "http://127.0.0.1:9"), environment: Fixtures.secrets)
        var checks: [String: [String: String]] = [:]
        try waitUntilBlocking("the documents are fetched: one passes, the other's failure is known") {
            let response = try broker.get("/readyz")
            #expect(response.status == 200)
            #expect(try response.json()["status"] as? String == "ready")
            checks = try #require(try response.json()["checks"] as? [String: [String: String]])
            return checks["provider:slow"]?["status"] == "pass" && checks["provider:down"]?["detail"]?.contains("127.0.0.1") == true
        }
        #expect(checks["state"]?["status"] == "pass")
        #expect(checks["provider:down"]?["status"] == "warn")
    }

    /// A provider that takes connections and never answers holds no probe: `/readyz` answers from
    /// memory (a probe's timeout is a few seconds, and every instance shares the provider).
    @Test func readyzNeverWaitsForAProvider() throws {
        let provider = try SlowProvider(delay: nil)
        let broker = try BrokerProcess(config: Fixtures.config(issuer: provider.issuer, extra: "  limits:\n    upstream_timeout_seconds: 60"),
                                       environment: Fixtures.secrets)
        for _ in 0..<3 {
            // Waiting on the provider, the answer would take half the upstream timeout (30 s):
            // twice the read's patience.
            let connection = try RawConnection(port: broker.port, timeoutSeconds: 15)
            connection.send("GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            let response = try connection.readResponse()
            #expect(response.status == 200)
            let checks = try #require(try response.json()["checks"] as? [String: [String: String]])
            #expect(checks["provider:slow"]?["status"] == "warn")
        }
    }

    @Test func accessLogHasOneLinePerRequestAndNoQueryString() throws {
        let broker = try BrokerProcess()
        _ = try broker.get("/healthz?code=SECRET-CODE-123&state=xyz", headers: ["X-Request-Id": "log-check"])
        try waitUntilBlocking("the request's access line is written") { broker.jsonLines.contains { $0["request_id"] as? String == "log-check" } }
        let line = try #require(broker.jsonLines.first { $0["request_id"] as? String == "log-check" })
        #expect(line["msg"] as? String == "request")
        #expect(line["path"] as? String == "/healthz")
        #expect(line["status"] as? Int == 200, "a JSON number")
        #expect(line["level"] as? String == "info")
        #expect(line["ts"] as? String != nil)
        #expect(!broker.lines.contains { $0.contains("SECRET-CODE-123") })
    }
}

enum Fixtures {
    static let secrets = ["SLOW_SECRET": "slow-client-secret-value", "DOWN_SECRET": "down-client-secret-value"]

    /// A sign-in start at the `slow` provider, answered in JSON: it waits for the provider's
    /// discovery document.
    static let signInStart = "/authorize?app=demo&provider=slow&redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcb&state=s"
        + "&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256"

    /// Requests the broker is answering now (`/metrics` itself among them).
    static func requestsInFlight(_ broker: BrokerProcess) throws -> Double? {
        try broker.get("/metrics").text.split(separator: "\n").first { $0.hasPrefix("broker_http_requests_in_flight ") }
            .flatMap { Double($0.split(separator: " ")[1]) }
    }

    /// Two providers by issuer: one reachable, one not; and an app of the first.
    static func config(issuer: String, missingIssuer: String? = nil, extra: String = "") -> String {
        var text = """
            server:
              shutdown_grace_seconds: 5
            \(extra)
            providers:
              slow:
                issuer: \(issuer)
                client_id: broker
                client_secret_env: SLOW_SECRET
            """
        if let missingIssuer {
            text += """

                  down:
                    issuer: \(missingIssuer)
                    client_id: broker
                    client_secret_env: DOWN_SECRET
                """
        }
        return text + """

            apps:
              demo:
                redirect_uris: [http://127.0.0.1:9/cb]
                providers: [slow]

            """
    }
}

