import Foundation
import Testing

/// Limits on the real binary: every one answered with its status and a JSON error, and the
/// server keeps serving afterwards.
@Suite(.serialized)
struct LimitsTests {
    private static let config = """
        server:
          limits:
            max_body_bytes: 65536
            max_header_bytes: 8192
            max_url_bytes: 2048
            max_connections_per_ip: 3
            idle_timeout_seconds: 1
        """

    @Test func unknownPathIs404AndWrongMethodIs405() throws {
        let broker = try BrokerProcess(config: Self.config)
        let missing = try broker.get("/nope")
        #expect(missing.status == 404)
        #expect(try missing.json()["error"] as? String == "not_found")
        let wrong = try RawHTTP.request(port: broker.port, method: "DELETE", target: "/healthz")
        #expect(wrong.status == 405)
        #expect(wrong.headers["allow"] == "GET, HEAD")
        #expect(try wrong.json()["error"] as? String == "method_not_allowed")
    }

    @Test func twoMegabyteBodyIs413AndServerKeepsServing() throws {
        let broker = try BrokerProcess(config: Self.config)
        let response = try RawHTTP.request(port: broker.port, method: "POST", target: "/token", body: [UInt8](repeating: 0x61, count: 2 << 20))
        #expect(response.status == 413)
        #expect(try response.json()["error"] as? String == "payload_too_large")
        #expect(try broker.get("/healthz").status == 200)
    }

    /// A chunked body declares no length: the 413 comes as soon as the body passes the limit,
    /// and the connection closes without the rest being read (32 MiB would not fit in the
    /// sockets' buffers: sending it all means the broker read it).
    @Test func chunkedBodyOverTheLimitIs413BeforeTheRestIsRead() throws {
        let broker = try BrokerProcess(config: Self.config)
        let connection = try RawConnection(port: broker.port)
        connection.send("POST /token HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        let chunk = Array("4000\r\n\(String(repeating: "a", count: 16384))\r\n".utf8)
        var sentEverything = true
        for _ in 0..<2048 where sentEverything { sentEverything = connection.send(chunk) }
        if sentEverything { connection.send("0\r\n\r\n") }
        #expect(!sentEverything, "the broker must stop reading once the body passes the limit")
        let response = try connection.readResponse()
        #expect(response.status == 413)
        #expect(try response.json()["error"] as? String == "payload_too_large")
        #expect(response.headers["x-content-type-options"] == "nosniff")
        #expect(response.headers["connection"]?.lowercased() == "close")
        #expect(connection.endsWithin(seconds: 3))
        #expect(try broker.get("/healthz").status == 200)
    }

    @Test func headersOverTheLimitAre431() throws {
        let broker = try BrokerProcess(config: Self.config)
        let response = try broker.get("/healthz", headers: ["X-Padding": String(repeating: "p", count: 9000)])
        #expect(response.status == 431)
        #expect(try response.json()["error"] as? String == "header_too_large")
        #expect(try broker.get("/healthz").status == 200)
    }

    @Test func longURLIs414() throws {
        let broker = try BrokerProcess(config: Self.config)
        let response = try broker.get("/healthz?pad=" + String(repeating: "u", count: 3000))
        #expect(response.status == 414)
        #expect(try response.json()["error"] as? String == "uri_too_long")
    }

    @Test func connectionsPerClientBeyondTheLimitGet503() throws {
        let broker = try BrokerProcess(config: Self.config.replacingOccurrences(of: "idle_timeout_seconds: 1", with: "idle_timeout_seconds: 30"))
        let held = try (0..<3).map { _ in try RawConnection(port: broker.port) }
        for connection in held {
            connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try connection.readResponse().status == 200)
        }
        let extra = try broker.get("/healthz")
        #expect(extra.status == 503)
        #expect(extra.headers["retry-after"] == "1")
        #expect(extra.headers["connection"]?.lowercased() == "close")
        #expect(try extra.json()["error"] as? String == "temporarily_unavailable")
    }

    /// A query of many parameters, well within the URL limit, is answered at once: 256 are read,
    /// more are a 414 and the connection closes (libmicrohttpd keeps each in its connection's
    /// memory, and past its room left the request unanswered until a deadline).
    @Test func aQueryOfTooManyParametersIs414AtOnce() throws {
        let broker = try BrokerProcess(config: Self.config)
        let many = try RawHTTP.request(port: broker.port, method: "GET", target: "/healthz?" + Array(repeating: "x=1", count: 256).joined(separator: "&"))
        #expect(many.status == 200)
        for query in [Array(repeating: "x=1", count: 600).joined(separator: "&"), String(repeating: "&", count: 1500)] {
            // Unanswered, the request would end without a response when the connection is cut.
            let response = try RawHTTP.request(port: broker.port, method: "GET", target: "/healthz?" + query)
            #expect(response.status == 414)
            #expect(try response.json()["error"] as? String == "uri_too_long")
            #expect(response.headers["connection"]?.lowercased() == "close" && response.headers["x-content-type-options"] == "nosniff")
        }
        #expect(try broker.get("/healthz").status == 200)
    }

    /// One client opening connections that send nothing, many more than it may hold: past its
    /// refused ones they are closed at once, so that libmicrohttpd's own limit (the total and
    /// some room for refusals) stays free for other clients, who are served.
    @Test func silentConnectionsFromOneClientLeaveRoomForOthers() throws {
        let broker = try BrokerProcess(config: Self.config
            .replacingOccurrences(of: "idle_timeout_seconds: 1", with: "idle_timeout_seconds: 30\n    max_connections: 20"))
        let silent = try (0..<120).map { _ in try RawConnection(port: broker.port) }
        // Held out, it would wait for the silent ones' idle timeout (30 s): twice the read's patience.
        let other = try RawConnection(port: broker.port, timeoutSeconds: 15, source: "127.0.0.2")
        other.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try other.readResponse().status == 200, "another client is served")
        #expect(silent.count == 120)
    }

    /// Found by fuzzing: `Expect: 100-continue` on a request without a body, then one more byte,
    /// made libmicrohttpd spin a core until the idle timeout.
    @Test func expectContinueWithoutABodyDoesNotSpin() throws {
        let broker = try BrokerProcess(config: Self.config.replacingOccurrences(of: "idle_timeout_seconds: 1", with: "idle_timeout_seconds: 30"))
        let before = try cpuSeconds(broker.process.processIdentifier)
        let connection = try RawConnection(port: broker.port)
        connection.send("GET /healthz HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\nx")
        let response = try connection.readResponse()
        #expect(response.status == 200)
        usleep(1_500_000)
        #expect(try cpuSeconds(broker.process.processIdentifier) - before < 0.5, "the broker must not spin")
    }

    private func cpuSeconds(_ pid: Int32) throws -> Double {
        let fields = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8).split(separator: " ")
        return (Double(fields[13]) ?? 0) / 100 + (Double(fields[14]) ?? 0) / 100
    }

    @Test func idleConnectionsAreClosed() throws {
        let broker = try BrokerProcess(config: Self.config)
        let connection = try RawConnection(port: broker.port, timeoutSeconds: 10)
        connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n") // never finishes its headers
        let started = Date()
        #expect(throws: RawHTTPError.self) { try connection.readResponse() }
        #expect(Date().timeIntervalSince(started) < 8)
        #expect(try broker.get("/healthz").status == 200)
    }
}
