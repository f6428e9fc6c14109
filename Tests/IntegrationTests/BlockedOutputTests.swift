import Foundation
import Testing
import TestWaiting

/// A standard output that stops draining (a pipe nobody reads) or goes away (its reader closed
/// it): the broker serves on, and no request waits for the log.
@Suite(.serialized)
struct BlockedOutputTests {
    /// The development provider's sign-in start: it logs `sign-in started` on a Swift executor
    /// thread.
    private static let signIn = "/authorize?provider=dev&app=demo&redirect_uri=http://127.0.0.1/callback"
        + "&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URXbuHG8WDJX88&code_challenge_method=S256&state=xyz"

    /// With stdout blocked so long that access-log lines are dropped, a sign-in still starts; its
    /// line comes out once stdout drains, and a clean stop still writes `stopped` last.
    @Test func aSignInStartsWhileStdoutIsBlocked() throws {
        let broker = try BrokerProcess(arguments: ["--dev"])
        broker.pauseOutput()
        try Self.fillOutput(of: broker)
        let started = try RawHTTP.request(port: broker.port, target: Self.signIn)
        #expect(started.status == 302)
        #expect(!broker.lines.contains { $0.contains(#""msg":"sign-in started""#) }, "stdout was still blocked")
        #expect(Self.counter(try broker.get("/metrics").text, #"broker_log_lines_dropped_total{kind="event"}"#) == 0)

        broker.resumeOutput()
        try waitUntilBlocking("the sign-in's line comes out once stdout drains") {
            broker.lines.contains { $0.contains(#""msg":"sign-in started""#) }
        }
        broker.signal(SIGTERM)
        #expect(broker.waitForExit(seconds: 30) == 0)
        #expect(broker.lines.last?.contains(#""msg":"stopped""#) == true)
    }

    /// Once the reader of its stdout has gone (`serve | head -1`), the broker's writes fail with
    /// EPIPE: it is not killed by SIGPIPE, serves on, counts the lines it could not write, and
    /// still stops cleanly.
    @Test func theBrokerServesOnOnceItsStdoutIsClosed() throws {
        let broker = try BrokerProcess()
        broker.closeOutput()
        try waitUntilBlocking("the reader closes the broker's stdout (woken by a request's line)") {
            _ = try broker.get("/healthz")
            return broker.outputClosed
        }
        try waitUntilBlocking("the broker counts access-log lines it could not write") {
            (Self.counter(try broker.get("/metrics").text, "broker_access_log_dropped_total") ?? 0) > 0
        }
        for _ in 0..<20 { #expect(try broker.get("/healthz").status == 200) }
        #expect(broker.process.isRunning)
        broker.signal(SIGTERM)
        #expect(broker.waitForExit(seconds: 30) == 0)
    }

    /// Sends requests until the broker drops access-log lines: its stdout has taken none of the
    /// last ~10,000, so its log's writer thread is stuck in `write`. Each connection carries a
    /// burst of pipelined requests, the last one closing it.
    private static func fillOutput(of broker: BrokerProcess) throws {
        let burst = String(repeating: "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", count: 499)
            + "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        try waitUntilBlocking("the broker drops access-log lines", seconds: 120) {
            let connection = try RawConnection(port: broker.port)
            connection.send(burst)
            _ = connection.bytesUntilEnd(seconds: 30)
            return (counter(try broker.get("/metrics").text, "broker_access_log_dropped_total") ?? 0) > 0
        }
    }

    /// A sample's value in a `/metrics` text.
    private static func counter(_ metrics: String, _ sample: String) -> Double? {
        metrics.split(separator: "\n").first { $0.hasPrefix(sample + " ") }.flatMap { Double($0.split(separator: " ")[1]) }
    }
}
