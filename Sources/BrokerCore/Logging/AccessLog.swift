import HTTPServer
import WireValues

/// The access log: one line per request. It is on every request's path, so the server thread
/// only packs the request's facts into the output's buffer (`LogOutput.writeSoon`,
/// `AccessEntry`); the output's writer thread writes the lines, in batches. The line has the
/// same shape as every other log line (`ts`, `level`, `logger`, `msg`, then the fields in key
/// order); numbers are JSON numbers, so that log tools can compare and sum them. The text format
/// puts the method, path and status first.
struct AccessLog: Sendable {
    let output: LogOutput
    let style: LogLineHandler.Style
    let label: String

    /// Hands `record` to the output; false when the output's buffer is full and the line was
    /// dropped (a request never waits for the log).
    @discardableResult
    func write(_ record: RequestRecord) -> Bool {
        output.writeSoon(record, style: style, label: label)
    }

    /// Appends the line of `entry`.
    static func appendLine(_ entry: AccessEntry, to line: inout [UInt8]) {
        switch entry.style {
        case .json:
            line.append(literal: #"{"ts":""#)
            Timestamp.append(entry.time, to: &line)
            line.append(literal: #"","level":"info","logger":"#)
            JSONValue.appendString(utf8: entry.label, to: &line)
            line.append(literal: #","msg":"request","bytes":"#)
            line.append(decimal: entry.responseBytes)
            line.append(literal: #","client":"#)
            JSONValue.appendString(utf8: entry.clientIP, to: &line)
            line.append(literal: #","duration_ms":"#)
            appendMilliseconds(entry.seconds, to: &line)
            line.append(literal: #","method":"#)
            JSONValue.appendString(utf8: entry.method, to: &line)
            line.append(literal: #","path":"#)
            JSONValue.appendString(utf8: entry.path, to: &line)
            if let proxyIP = entry.proxyIP {
                line.append(literal: #","proxy":"#)
                JSONValue.appendString(utf8: proxyIP, to: &line)
            }
            line.append(literal: #","request_id":"#)
            JSONValue.appendString(utf8: entry.requestID, to: &line)
            line.append(literal: #","status":"#)
            line.append(decimal: entry.status)
            if let traceID = entry.traceID {
                line.append(literal: #","trace_id":"#)
                JSONValue.appendString(utf8: traceID, to: &line)
            }
            line.append(literal: "}\n")
        case .text:
            // For a person at a terminal: what was asked and how it went first; what a request
            // sent (its path, its id) escaped like every text line's values.
            Timestamp.append(entry.time, to: &line)
            line.append(literal: " INFO request method=")
            TextLine.append(entry.method, to: &line)
            line.append(literal: " path=")
            TextLine.append(entry.path, to: &line)
            line.append(literal: " status=")
            line.append(decimal: entry.status)
            line.append(literal: " duration_ms=")
            appendMilliseconds(entry.seconds, to: &line)
            line.append(literal: " bytes=")
            line.append(decimal: entry.responseBytes)
            line.append(literal: " client=")
            TextLine.append(entry.clientIP, to: &line)
            if let proxyIP = entry.proxyIP {
                line.append(literal: " proxy=")
                TextLine.append(proxyIP, to: &line)
            }
            line.append(literal: " request_id=")
            TextLine.append(entry.requestID, to: &line)
            if let traceID = entry.traceID {
                line.append(literal: " trace_id=")
                TextLine.append(traceID, to: &line)
            }
            line.append(UInt8(ascii: "\n"))
        }
    }

    /// `seconds` as milliseconds with three decimals (microseconds), e.g. `0.125`.
    static func appendMilliseconds(_ seconds: Double, to line: inout [UInt8]) {
        let microseconds = max(0, Int((seconds * 1e6).rounded()))
        line.append(decimal: microseconds / 1000)
        line.append(UInt8(ascii: "."))
        line.append(decimal: microseconds % 1000, minimumDigits: 3)
    }
}
