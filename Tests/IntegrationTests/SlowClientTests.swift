import Foundation
import TestWaiting
import Testing

/// Clients that send their request too slowly to ever reach the idle timeout (a byte now and
/// then) are closed by the request deadlines (`request_head_timeout_seconds`,
/// `request_body_min_bytes_per_second`); clients that keep up are not, and neither are idle
/// connections kept for a next request, until the idle timeout.
@Suite(.serialized)
struct SlowClientTests {
    private static let config = """
        server:
          limits:
            idle_timeout_seconds: 30
            request_head_timeout_seconds: 2
            request_body_min_bytes_per_second: 1024
        """

    @Test func aHeadTrickledByteByByteIsCutOffAtItsDeadline() throws {
        let broker = try BrokerProcess(config: Self.config)
        let connection = try RawConnection(port: broker.port)
        let head = Array("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: \(String(repeating: "s", count: 64))\r\n\r\n".utf8)
        // A byte every half second: far inside the idle timeout, far outside the head deadline.
        let ended = connection.trickle(head, interval: 0.5, upTo: 8)
        #expect(ended.map { $0 < 5 } == true, "the broker must close a connection whose head takes longer than 2 s")
        #expect(try broker.get("/healthz").status == 200)
    }

    /// libmicrohttpd's messages (one a malformed request) are held back past a few a minute; the
    /// watchdog's count of the connections it cut is the broker's own, and always logged.
    @Test func theWatchdogsLineIsLoggedPastManyMalformedRequests() throws {
        let broker = try BrokerProcess(config: Self.config)
        for _ in 0..<15 {
            let malformed = try RawConnection(port: broker.port)
            malformed.send("GET /healthz HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n")
            _ = malformed.bytesUntilEnd(seconds: 5)
        }
        try waitUntilBlocking("libmicrohttpd's lines are held back") { broker.lines.contains { $0.contains("were not logged") } || broker.lines.filter { $0.contains("libmicrohttpd") }.count >= 10 }
        let slow = try RawConnection(port: broker.port)
        slow.send("GET /healthz HTTP/1.1\r\n")
        try waitUntilBlocking("the slow head is logged") { broker.lines.contains { $0.contains("did not arrive in time") } }
    }

    /// A client pool reuses a connection after a pause longer than the head timeout: the
    /// connection is still open (announced with `Keep-Alive: timeout=`), a `POST` on it is
    /// answered, and nothing is logged as slow. So is a connection opened ahead of its request.
    @Test func anIdleConnectionStaysOpenForItsNextRequestUntilTheIdleTimeout() throws {
        let broker = try BrokerProcess(config: Self.config)
        let reused = try RawConnection(port: broker.port)
        let early = try RawConnection(port: broker.port)
        reused.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        let first = try reused.readResponse()
        #expect(first.status == 200 && first.headers["keep-alive"] == "timeout=30")
        Thread.sleep(forTimeInterval: 4.5)
        let post = "POST /token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 3\r\n\r\na=b"
        #expect(reused.send(post))
        #expect(try reused.readResponse().status == 400, "the POST on the kept connection is answered")
        #expect(early.send(post))
        #expect(try early.readResponse().status == 400, "the connection opened 4.5 s before its request is answered")
        // After an idle pause, a head that trickles is still cut at its deadline.
        Thread.sleep(forTimeInterval: 3)
        let ended = reused.trickle(Array("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: \(String(repeating: "s", count: 64))\r\n\r\n".utf8),
                                   interval: 0.5, upTo: 8)
        #expect(ended.map { $0 < 5 } == true)
        try waitUntilBlocking("the slow head is logged") { broker.lines.contains { $0.contains("did not arrive in time") } }
        #expect(broker.lines.filter { $0.contains("did not arrive in time") }.count == 1, "only the slow client is logged")
    }

    @Test func aBodyBelowTheMinimumRateIsCutOff() throws {
        let broker = try BrokerProcess(config: Self.config)
        let connection = try RawConnection(port: broker.port)
        connection.send("POST /token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 60000\r\n\r\n")
        // 100 bytes every half second: 200 bytes per second, below the minimum of 1024.
        let ended = Self.sendSlowly(on: connection, chunk: 100, interval: 0.5, upTo: 8)
        #expect(ended.map { $0 < 6 } == true, "the broker must close a connection whose body arrives below the minimum rate")
    }

    /// The negative control: a head sent at once and a body that keeps the minimum rate, yet
    /// takes twice the head timeout, gets its answer.
    @Test func aBodyThatKeepsTheRateIsAnswered() throws {
        let broker = try BrokerProcess(config: Self.config)
        let connection = try RawConnection(port: broker.port)
        let body = "grant_type=refresh_token&refresh_token=" + String(repeating: "r", count: 8_152)
        connection.send("POST /token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: \(body.utf8.count)\r\n\r\n")
        // 512 bytes every 250 ms: 2048 bytes per second, for about four seconds.
        var rest = Array(body.utf8)[...]
        while !rest.isEmpty {
            #expect(connection.send(Array(rest.prefix(512))))
            rest = rest.dropFirst(512)
            usleep(250_000)
        }
        let response = try connection.readResponse()
        #expect(response.status == 400)
        #expect(try response.json()["error"] as? String != nil)
    }

    /// Sends `chunk` bytes every `interval` seconds; returns after how many seconds the server
    /// ended the connection, or nil.
    private static func sendSlowly(on connection: RawConnection, chunk: Int, interval: Double, upTo seconds: Double) -> Double? {
        let started = Date()
        while Date().timeIntervalSince(started) < seconds {
            guard connection.send([UInt8](repeating: 0x61, count: chunk)) else { return Date().timeIntervalSince(started) }
            if connection.endsWithin(seconds: interval) { return Date().timeIntervalSince(started) }
        }
        return nil
    }
}
