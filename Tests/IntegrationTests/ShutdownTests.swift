import Foundation
import Synchronization
import Testing
import TestWaiting

/// SIGTERM, SIGHUP and SIGINT: serve on for the shutdown delay with `/readyz` at 503 (SIGTERM,
/// SIGHUP), then stop accepting, let pending requests finish within the grace period, exit 0,
/// never abort, even with suspended connections.
@Suite(.serialized)
struct ShutdownTests {
    @Test func sigtermLetsASuspendedRequestFinish() throws {
        let provider = try SlowProvider(delay: 3)
        let broker = try BrokerProcess(config: Fixtures.config(issuer: provider.issuer), environment: Fixtures.secrets)
        let result = Mutex<RawHTTPResponse?>(nil)
        let done = DispatchSemaphore(value: 0)
        let port = broker.port
        Thread.detachNewThread {
            result.withLock { $0 = try? RawHTTP.request(port: port, target: Fixtures.signInStart, headers: ["Accept": "application/json"]) }
            done.signal()
        }
        try waitUntilBlocking("the sign-in start waits for the provider, suspended") { try Fixtures.requestsInFlight(broker) ?? 0 >= 2 }
        broker.signal(SIGTERM)
        #expect(done.wait(timeout: .now() + 10) == .success)
        let response = try #require(result.withLock { $0 })
        #expect(response.status == 200)
        #expect(response.headers["connection"]?.lowercased() == "close")
        #expect(broker.waitForExit(seconds: 10) == 0)
        #expect(throws: RawHTTPError.self) { try RawConnection(port: port) }
        #expect(broker.lines.contains { $0.contains(#""msg":"stopped""#) && $0.contains(#""requests_cut_short":0"#) })
    }

    /// What a balancer needs: from SIGTERM on, `/readyz` fails at once while new connections are
    /// still accepted and served (each answer closing its connection) for the delay; then the
    /// broker stops accepting and exits.
    @Test func sigtermServesOnForTheDelayWithReadyzFailing() throws {
        let broker = try BrokerProcess(environment: ["BROKER_SHUTDOWN_DELAY_SECONDS": "3"])
        #expect(try broker.get("/readyz").status == 200)
        let signalled = Date()
        broker.signal(SIGTERM)
        try waitUntilBlocking("/readyz fails once SIGTERM came", seconds: 2.5) { (try? broker.get("/readyz"))?.status == 503 }
        let readiness = try broker.get("/readyz")
        #expect(try readiness.json()["status"] as? String == "not_ready")
        var served = 0
        while Date().timeIntervalSince(signalled) < 2.5 {
            let answer = try broker.get("/healthz")
            #expect(answer.status == 200 && answer.headers["connection"]?.lowercased() == "close")
            served += 1
            Thread.sleep(forTimeInterval: 0.1)
        }
        #expect(served >= 15, "new connections are served during the delay")
        #expect(broker.waitForExit(seconds: 10) == 0)
        #expect(Date().timeIntervalSince(signalled) >= 3)
        #expect(throws: RawHTTPError.self) { try RawConnection(port: broker.port) }
    }

    /// Every request answered before a clean stop has its access-log line, before `stopped`: the
    /// lines still waiting in the log's buffer are written at the stop, not lost.
    @Test func aCleanStopWritesEveryAccessLine() throws {
        let broker = try BrokerProcess(environment: ["BROKER_SHUTDOWN_DELAY_SECONDS": "0"])
        let connection = try RawConnection(port: broker.port)
        let requests = 500
        for number in 0..<requests {
            #expect(connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: stop-\(number)\r\n\r\n"))
            #expect(try connection.readResponse().status == 200)
        }
        broker.signal(SIGTERM)
        #expect(broker.waitForExit(seconds: 10) == 0)
        try waitUntilBlocking("the broker says it stopped") { broker.lines.contains { $0.contains(#""msg":"stopped""#) } }
        let lines = broker.lines
        let stopped = try #require(lines.firstIndex { $0.contains(#""msg":"stopped""#) })
        let logged = lines[..<stopped].compactMap { line -> String? in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  object["msg"] as? String == "request" else { return nil }
            return object["request_id"] as? String
        }
        #expect(Set(logged.filter { $0.hasPrefix("stop-") }) == Set((0..<requests).map { "stop-\($0)" }))
    }

    /// SIGHUP (a closed terminal, an operator expecting a reload) stops the broker as SIGTERM
    /// does: through the delay, drained, `stopped` written last, exit 0 — not killed at once.
    @Test func sighupStopsGracefully() throws {
        let broker = try BrokerProcess(environment: ["BROKER_SHUTDOWN_DELAY_SECONDS": "3"])
        #expect(try broker.get("/readyz").status == 200)
        broker.signal(SIGHUP)
        try waitUntilBlocking("/readyz fails once SIGHUP came") { (try? broker.get("/readyz"))?.status == 503 }
        #expect(broker.waitForExit(seconds: 10) == 0)
        #expect(broker.lines.contains { $0.contains(#""msg":"signal received""#) && $0.contains(#""signal":"SIGHUP""#) })
        #expect(broker.lines.last?.contains(#""msg":"stopped""#) == true)
    }

    /// A person's Ctrl-C, or a second SIGTERM, does not wait for the delay.
    @Test func sigintOrASecondSignalSkipsTheDelay() throws {
        let interrupted = try BrokerProcess(environment: ["BROKER_SHUTDOWN_DELAY_SECONDS": "30"])
        var signalled = Date()
        interrupted.signal(SIGINT)
        #expect(interrupted.waitForExit(seconds: 10) == 0)
        #expect(Date().timeIntervalSince(signalled) < 5)

        let twice = try BrokerProcess(environment: ["BROKER_SHUTDOWN_DELAY_SECONDS": "30"])
        signalled = Date()
        twice.signal(SIGTERM)
        try waitUntilBlocking("/readyz fails once the first SIGTERM came") { (try? twice.get("/readyz"))?.status == 503 }
        twice.signal(SIGTERM)
        #expect(twice.waitForExit(seconds: 10) == 0)
        #expect(Date().timeIntervalSince(signalled) < 6)
        #expect(twice.lines.contains { $0.contains("the shutdown delay is cut short") })
    }

    @Test func sigintCutsShortWhatOutlivesTheGracePeriod() throws {
        let provider = try SlowProvider(delay: nil)
        let broker = try BrokerProcess(
            config: Fixtures.config(issuer: provider.issuer).replacingOccurrences(of: "shutdown_grace_seconds: 5", with: "shutdown_grace_seconds: 1"),
            environment: Fixtures.secrets
        )
        let result = Mutex<RawHTTPResponse?>(nil)
        let done = DispatchSemaphore(value: 0)
        let port = broker.port
        Thread.detachNewThread {
            result.withLock { $0 = try? RawHTTP.request(port: port, target: Fixtures.signInStart, headers: ["Accept": "application/json"]) }
            done.signal()
        }
        try waitUntilBlocking("the sign-in start waits for the provider") { try Fixtures.requestsInFlight(broker) ?? 0 >= 2 }
        let signalled = Date()
        broker.signal(SIGINT)
        #expect(done.wait(timeout: .now() + 10) == .success)
        let response = try #require(result.withLock { $0 })
        #expect(response.status == 503)
        #expect(try response.json()["error"] as? String == "temporarily_unavailable")
        #expect(broker.waitForExit(seconds: 10) == 0)
        #expect(Date().timeIntervalSince(signalled) < 5)
        #expect(broker.lines.contains { $0.contains(#""requests_cut_short":1"#) })
    }

    /// Found by fuzzing: libmicrohttpd 0.9.75 drops a request that hits two protocol errors (a
    /// 431, then a malformed Content-Length) without reporting its completion; the request must
    /// still end, or shutdown waits for it the whole grace period.
    @Test func droppedRequestsDoNotHoldUpShutdown() throws {
        let broker = try BrokerProcess(config: "server:\n  shutdown_grace_seconds: 8\n")
        let connection = try RawConnection(port: broker.port, timeoutSeconds: 5)
        connection.send("POST /token HTTP/1.1\r\nHost: a\r\nCookie: \(String(repeating: "c", count: 40_000))\r\nContent-Length: x\r\n\r\n")
        _ = try? connection.readResponse()
        #expect(try broker.get("/healthz").status == 200)
        let signalled = Date()
        broker.signal(SIGTERM)
        #expect(broker.waitForExit(seconds: 12) == 0)
        #expect(Date().timeIntervalSince(signalled) < 4)
    }

    @Test func sigtermUnderLoadExitsZero() throws {
        let broker = try BrokerProcess()
        let port = broker.port
        let stop = Atomic<Bool>(false)
        let served = Atomic<Int>(0)
        let group = DispatchGroup()
        for _ in 0..<4 {
            group.enter()
            Thread.detachNewThread {
                while !stop.load(ordering: .relaxed) {
                    if (try? RawHTTP.request(port: port, target: "/healthz"))?.status == 200 {
                        served.add(1, ordering: .relaxed)
                    }
                }
                group.leave()
            }
        }
        try waitUntilBlocking("more than 200 requests are served") { served.load(ordering: .relaxed) > 200 }
        broker.signal(SIGTERM)
        let status = broker.waitForExit(seconds: 10)
        stop.store(true, ordering: .relaxed)
        _ = group.wait(timeout: .now() + 10)
        #expect(status == 0)
        #expect(!broker.lines.contains { $0.contains("suspended connections") })
    }
}
