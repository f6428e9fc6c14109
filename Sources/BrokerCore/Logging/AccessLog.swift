import HTTPServer
import WireValues

/// The access log: one line per request, written straight to bytes and handed to the output's
/// buffer (`LogOutput.writeSoon`). It is on every request's path, so it skips swift-log's
/// metadata dictionaries; the line has the same shape as every other log line (`ts`, `level`,
/// `logger`, `msg`, then the fields in key order).
struct AccessLog: Sendable {
    let output: LogOutput
    let style: LogLineHandler.Style
    let label: String

    func write(_ record: RequestRecord) {
        var line: [UInt8] = []
        line.reserveCapacity(256)
        switch style {
        case .json:
            line.append(literal: #"{"ts":""#)
            Timestamp.append(to: &line)
            line.append(literal: #"","level":"info","logger":"#)
            JSONValue.appendString(label, to: &line)
            // Numbers as JSON numbers, so that log tools can compare and sum them.
            line.append(literal: #","msg":"request","bytes":"#)
            line.append(decimal: record.responseBytes)
            line.append(literal: #","client":"#)
            JSONValue.appendString(record.clientIP, to: &line)
            line.append(literal: #","duration_ms":"#)
            Self.appendMilliseconds(record.seconds, to: &line)
            line.append(literal: #","method":"#)
            JSONValue.appendString(record.method, to: &line)
            line.append(literal: #","path":"#)
            JSONValue.appendString(record.path, to: &line)
            if let proxyIP = record.proxyIP {
                line.append(literal: #","proxy":"#)
                JSONValue.appendString(proxyIP, to: &line)
            }
            line.append(literal: #","request_id":"#)
            JSONValue.appendString(record.requestID, to: &line)
            line.append(literal: #","status":"#)
            line.append(decimal: record.status)
            line.append(literal: "}\n")
        case .text:
            Timestamp.append(to: &line)
            line.append(literal: " INFO request bytes=")
            line.append(decimal: record.responseBytes)
            line.append(contentsOf: " client=\(record.clientIP) duration_ms=".utf8)
            Self.appendMilliseconds(record.seconds, to: &line)
            line.append(contentsOf: " method=\(record.method) path=\(record.path)".utf8)
            if let proxyIP = record.proxyIP { line.append(contentsOf: " proxy=\(proxyIP)".utf8) }
            line.append(contentsOf: " request_id=\(record.requestID) status=".utf8)
            line.append(decimal: record.status)
            line.append(UInt8(ascii: "\n"))
        }
        output.writeSoon(line)
    }

    /// `seconds` as milliseconds with three decimals (microseconds), e.g. `0.125`.
    static func appendMilliseconds(_ seconds: Double, to line: inout [UInt8]) {
        let microseconds = max(0, Int((seconds * 1e6).rounded()))
        line.append(decimal: microseconds / 1000)
        line.append(UInt8(ascii: "."))
        line.append(decimal: microseconds % 1000, minimumDigits: 3)
    }
}
