import Foundation
import Logging
import Synchronization
import TestWaiting
import Testing
import WireValues

@testable import BrokerCore
@testable import HTTPServer

struct LoggingTests {
    /// The computed calendar agrees with the C library's on days from 1900 to 2400, including
    /// the leap days of 2000 and 2400 and the missing ones of 1900 and 2100.
    @Test func timestampsMatchGmtime() {
        var seconds = -2_208_988_800 // 1900-01-01
        while seconds < 13_569_465_600 { // 2400-01-01
            var time = time_t(seconds)
            var parts = tm()
            gmtime_r(&time, &parts)
            let expected = String(
                format: "%04d-%02d-%02dT%02d:%02d:%02dZ",
                parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec
            )
            #expect(Timestamp.format(seconds: seconds) == expected)
            seconds += 86_400 * 3 + 3_661 // every third day, at a moving time of day
        }
        #expect(Timestamp.format(seconds: 951_782_400) == "2000-02-29T00:00:00Z")
        #expect(Timestamp.format(seconds: 4_107_542_400) == "2100-03-01T00:00:00Z")
    }

    @Test func accessLinesNameTheProxyOnlyBehindOne() throws {
        var record = RequestRecord(method: "GET", route: "/token", path: "/token", status: 200, seconds: 0.0015,
                                   requestID: "r-1", clientIP: "198.51.100.9", proxyIP: nil, responseBytes: 42)
        for style in [LogLineHandler.Style.json, .text] {
            let output = LogOutput.memory()
            let log = AccessLog(output: output, style: style, label: "token-broker")
            log.write(record)
            record.proxyIP = "10.0.0.5"
            log.write(record)
            record.proxyIP = nil
            let lines = output.lines
            try #require(lines.count == 2)
            #expect(!lines[0].contains("proxy"))
            if style == .json {
                let direct = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
                #expect(direct["client"] as? String == "198.51.100.9" && direct["duration_ms"] as? Double == 1.5)
                #expect(direct["status"] as? Int == 200 && direct["bytes"] as? Int == 42, "numbers as JSON numbers")
                #expect(lines[0].contains(#""duration_ms":1.500,"#))
                let proxied = try #require(try JSONSerialization.jsonObject(with: Data(lines[1].utf8)) as? [String: Any])
                #expect(proxied["proxy"] as? String == "10.0.0.5" && proxied["client"] as? String == "198.51.100.9")
            } else {
                #expect(lines[1].contains(" INFO request method=GET path=/token status=200 duration_ms=1.500 bytes=42 "),
                        "what was asked and how it went first")
                #expect(lines[1].hasSuffix(" client=198.51.100.9 proxy=10.0.0.5 request_id=r-1"))
            }
        }
    }

    /// A request whose caller sent a `traceparent` names its trace; others have no `trace_id`.
    @Test func accessLinesNameTheCallersTrace() throws {
        var record = RequestRecord(method: "GET", route: "/token", path: "/token", status: 200, seconds: 0.001,
                                   requestID: "r-1", clientIP: "198.51.100.9", proxyIP: nil, responseBytes: 0)
        for style in [LogLineHandler.Style.json, .text] {
            let output = LogOutput.memory()
            let log = AccessLog(output: output, style: style, label: "token-broker")
            record.traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
            log.write(record)
            record.traceID = nil
            log.write(record)
            let lines = output.lines
            try #require(lines.count == 2)
            #expect(lines[0].contains(style == .json ? #""trace_id":"4bf92f3577b34da6a3ce929d0e0e4736""# : " trace_id=4bf92f3577b34da6a3ce929d0e0e4736"))
            #expect(!lines[1].contains("trace_id"))
        }
    }

    /// A value with a newline or a terminal escape cannot forge a line or move the cursor in the
    /// text format: in events and in access lines alike.
    @Test func theTextFormatEscapesControlCharacters() throws {
        let output = LogOutput.memory()
        let logger = Logger(label: "test") { LogLineHandler(label: $0, level: .info, style: .text, output: output) }
        logger.notice("audit", metadata: ["subject": "bob\n2026-11-27T00:00:00.000Z NOTICE audit forged=1\u{1B}[2J\\"])
        AccessLog(output: output, style: .text, label: "token-broker").write(RequestRecord(
            method: "GET", route: "unmatched", path: "/a\r\nb\u{7F}", status: 404, seconds: 0.001, requestID: "r\t1",
            clientIP: "198.51.100.9", proxyIP: nil, responseBytes: 0))
        let lines = output.lines
        try #require(lines.count == 2)
        #expect(lines[0].hasSuffix(#" subject=bob\n2026-11-27T00:00:00.000Z NOTICE audit forged=1\x1b[2J\\"#))
        #expect(lines[1].contains(#" path=/a\r\nb\x7f status=404 "#) && lines[1].hasSuffix(#" request_id=r\t1"#))
        #expect(lines.allSatisfy { line in !line.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F } })
    }

    /// In the text format a list or a map reads as the JSON format writes it, not as Swift
    /// prints a dictionary; a string or a number as itself.
    @Test func theTextFormatWritesListsAndMapsAsJSON() throws {
        let output = LogOutput.memory()
        let logger = Logger(label: "test") { LogLineHandler(label: $0, level: .info, style: .text, output: output) }
        logger.notice("audit", metadata: [
            "provider_revocation": .dictionary(["succeeded": .stringConvertible(1), "queued": .stringConvertible(0)]),
            "providers": .array(["a", "b"]), "count": .stringConvertible(2), "subject": "bob",
        ])
        let line = try #require(output.lines.first)
        #expect(line.hasSuffix(#" NOTICE audit count=2 provider_revocation={"queued":0,"succeeded":1} providers=["a","b"] subject=bob"#), "\(line)")
    }

    /// Numbers are JSON numbers and lists JSON arrays in event lines, as in access lines; the
    /// audit trail's fields keep their JSON types.
    @Test func eventFieldsKeepTheirTypes() throws {
        let output = LogOutput.memory()
        let logger = Logger(label: "test") { LogLineHandler(label: $0, level: .info, style: .json, output: output) }
        logger.notice("stopped", metadata: ["requests_cut_short": .stringConvertible(0), "grace_seconds": .stringConvertible(10.0),
                                            "providers": .array(["a", "b"]), "detail": "2"])
        AuditTrail(logger: logger, webhooks: nil, metrics: BrokerMetrics()).record("session.ended", [
            ("ended", .int(2)), ("sessions", .array([.string("s1"), .string("s2")])), ("held", .bool(true)),
        ])
        let lines = try output.lines.map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        try #require(lines.count == 2)
        #expect(lines[0]["requests_cut_short"] as? Int == 0 && lines[0]["grace_seconds"] as? Double == 10)
        #expect(lines[0]["providers"] as? [String] == ["a", "b"] && lines[0]["detail"] as? String == "2", "a string stays a string")
        #expect(lines[1]["ended"] as? Int == 2 && lines[1]["sessions"] as? [String] == ["s1", "s2"] && lines[1]["held"] as? Bool == true)
    }

    @Test func nowHasMilliseconds() throws {
        let now = Timestamp.now()
        #expect(now.utf8.count == 24)
        #expect(try #/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/#.wholeMatch(in: now) != nil)
    }

    @Test func millisecondsHaveThreeDecimals() {
        func text(_ seconds: Double) -> String {
            var bytes: [UInt8] = []
            AccessLog.appendMilliseconds(seconds, to: &bytes)
            return String(decoding: bytes, as: UTF8.self)
        }
        #expect(text(0.000_125) == "0.125")
        #expect(text(0.012_5) == "12.500")
        #expect(text(2.000_000_4) == "2000.000")
        #expect(text(0) == "0.000")
    }

    /// Access-log lines and events reach the file on their own, a thread's in the order it
    /// wrote them.
    @Test func bufferedLinesKeepTheirOrder() throws {
        try withFileOutput { output, path in
            let log = AccessLog(output: output, style: .text, label: "token-broker")
            for number in 1...1000 { #expect(log.write(Self.record(id: "access-\(number)"))) }
            output.write(Array("event\n".utf8), kind: .event)
            try waitUntilBlocking("the event reaches the file") { try String(contentsOfFile: path, encoding: .utf8).hasSuffix("event\n") }
            let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
            #expect(lines.map(Self.requestID) == (1...1000).map { "access-\($0)" } + [nil])

            log.write(Self.record(id: "later"))
            try waitUntilBlocking("the later line reaches the file") {
                try String(contentsOfFile: path, encoding: .utf8).hasSuffix(" request_id=later\n")
            }
            let last = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").suffix(2)
            #expect(last.map(Self.requestID) == [nil, "later"])
        }
    }

    /// Lines written by many threads at once all reach the file on their own (the writer thread
    /// wakes for them: no flush), each thread's in its order, none split or merged.
    @Test func linesOfManyThreadsKeepEachThreadsOrder() throws {
        try withFileOutput { output, path in
            let log = AccessLog(output: output, style: .json, label: "token-broker")
            let threads = 12, linesPerThread = 2_000
            let done = DispatchGroup()
            for thread in 0..<threads {
                done.enter()
                Thread {
                    for number in 0..<linesPerThread {
                        log.write(Self.record(id: "t\(thread)-\(number)"))
                        if number % 500 == 0 { usleep(3_000) } // let the writer catch up and sleep
                    }
                    done.leave()
                }.start()
            }
            done.wait()
            var lines: [Substring] = []
            try waitUntilBlocking("every thread's lines reach the file") {
                lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
                return lines.count >= threads * linesPerThread
            }
            var next = [Int](repeating: 0, count: threads)
            for line in lines {
                let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                let fields = (object?["request_id"] as? String)?.dropFirst().split(separator: "-").compactMap { Int($0) } ?? []
                try #require(fields.count == 2 && fields[0] < threads, "malformed line \(line)")
                #expect(fields[1] == next[fields[0]], "thread \(fields[0]) wrote \(fields[1]) before \(next[fields[0]])")
                next[fields[0]] = fields[1] + 1
            }
            #expect(next == [Int](repeating: linesPerThread, count: threads))
        }
    }

    /// When the output is slower than the requests (here: a pipe nobody reads), the buffer fills
    /// and further lines are dropped and counted — the request does not wait; every line
    /// accepted reaches the output once it drains, and a flush writes the last of them.
    @Test func aFullBufferDropsLinesAndCountsThem() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]) }
        let output = LogOutput.descriptor(ends[1])
        let metrics = BrokerMetrics()
        let reporter = RequestReporter(metrics: metrics, logger: Logger(label: "test"),
                                       accessLog: AccessLog(output: output, style: .json, label: "token-broker"))
        let sent = 100_000
        let started = Date()
        for number in 0..<sent { reporter.requestFinished(Self.record(id: "r-\(number)")) }
        #expect(Date().timeIntervalSince(started) < 10, "no request waited for the blocked output")
        metrics.logLinesDropped(.access, total: output.dropped(.access))
        let rendered = String(decoding: metrics.render(), as: UTF8.self)
        let dropped = try #require(rendered.split(separator: "\n").first { $0.hasPrefix("broker_access_log_dropped_total ") }
            .flatMap { Int($0.split(separator: " ")[1]) })
        #expect(dropped > 0 && dropped < sent)

        let lines = try Self.drain(ends, output)
        #expect(lines.count == sent - dropped, "every accepted line is written, once")
        #expect(Set(lines).count == lines.count)
    }

    /// Against an output that takes nothing (a pipe nobody reads), no write waits: access-log
    /// lines are dropped first, events once they have filled their room past that, audit lines
    /// last — each counted by kind; what was accepted comes out once the pipe drains.
    @Test func aBlockedOutputDropsAccessLinesFirstAndAuditLinesLast() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]) }
        let output = LogOutput.descriptor(ends[1])
        let log = AccessLog(output: output, style: .json, label: "token-broker")
        var accepted = 0
        while log.write(Self.record(id: "r-\(accepted)")) && accepted < 1_000_000 { accepted += 1 }
        #expect(output.dropped(.access) == 1 && accepted < 1_000_000)
        let event = Array(#"{"msg":"event"}"#.utf8) + [UInt8(ascii: "\n")]
        var events = 0
        while output.dropped(.event) == 0 && events < 1_000_000 {
            output.write(event, kind: .event)
            events += 1
        }
        #expect(events > 1, "events have room where access-log lines have none")
        #expect(output.dropped(.event) == 1 && output.dropped(.audit) == 0)
        output.write(Array(#"{"msg":"audit"}"#.utf8) + [UInt8(ascii: "\n")], kind: .audit)
        #expect(output.dropped(.audit) == 0, "audit lines have room where events have none")
        #expect(!log.write(Self.record(id: "late")) && output.dropped(.access) == 2)

        let lines = try Self.drain(ends, output)
        #expect(lines.count == accepted + events - 1 + 1, "every accepted line is written, once")
        #expect(lines.last == #"{"msg":"audit"}"#)
    }

    private static func record(id: String) -> RequestRecord {
        RequestRecord(method: "GET", route: "/token", path: "/token", status: 200, seconds: 0.0015,
                      requestID: id, clientIP: "198.51.100.9", proxyIP: nil, responseBytes: 42)
    }

    /// The request id of a text access-log line; nil for another line.
    private static func requestID(_ line: Substring) -> String? {
        line.split(separator: " ").first { $0.hasPrefix("request_id=") }.map { String($0.dropFirst("request_id=".count)) }
    }

    /// Runs `body` with an output writing to a new temporary file, and the file's path.
    private func withFileOutput(_ body: (LogOutput, String) throws -> Void) throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("log-\(UUID().uuidString)").path
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        try #require(descriptor >= 0)
        defer {
            close(descriptor)
            unlink(path)
        }
        try body(LogOutput.descriptor(descriptor), path)
    }
}

/// libmicrohttpd's messages, one a malformed request: any client could fill the log with them.
struct MessageThrottleTests {
    @Test func atMostTheLimitAWindowAndTheNextLineSaysHowManyWereHeld() {
        let clock = Mutex<Double>(0)
        let throttle = MessageThrottle(limit: 2, window: 60, now: { clock.withLock { $0 } })
        #expect(throttle.admit() == 0 && throttle.admit() == 0)
        #expect((0..<5).map { _ in throttle.admit() } == [nil, nil, nil, nil, nil])
        clock.withLock { $0 = 59 }
        #expect(throttle.admit() == nil, "still the same window")
        clock.withLock { $0 = 61 }
        #expect(throttle.admit() == 6, "the first line of the next window counts what was held")
        #expect(throttle.admit() == 0)
    }
}

extension LoggingTests {
    /// Reads the pipe `ends` (read end, write end) to its end while `output` writes what it holds
    /// into it and the write end closes: the lines written.
    static func drain(_ ends: [Int32], _ output: LogOutput) throws -> [Substring] {
        let received = Mutex<[UInt8]>([])
        let reader = Thread { [reading = ends[0]] in
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(reading, $0.baseAddress, $0.count) }
                guard count > 0 else { return }
                received.withLock { $0 += chunk[..<count] }
            }
        }
        reader.start()
        output.flush()
        close(ends[1])
        try waitUntilBlocking("the reader reads to the end of the pipe") { reader.isFinished }
        return received.withLock { String(decoding: $0, as: UTF8.self) }.split(separator: "\n")
    }
}
