import HTTPServer

/// The access log: one line per request, written straight to bytes. It is on every request's
/// path, so it skips swift-log's metadata dictionaries; the line has the same shape as every
/// other log line (`ts`, `level`, `logger`, `msg`, then the fields in key order).
struct AccessLog: Sendable {
    let output: LogOutput
    let style: LogLineHandler.Style
    let label: String

    func write(_ record: RequestRecord) {
        var line: [UInt8] = []
        line.reserveCapacity(256)
        let milliseconds = String((record.seconds * 1e6).rounded() / 1e3)
        switch style {
        case .json:
            line.append(contentsOf: #"{"ts":""#.utf8)
            Timestamp.append(to: &line)
            line.append(contentsOf: #"","level":"info","logger":"#.utf8)
            JSONValue.appendString(label, to: &line)
            line.append(contentsOf: #","msg":"request","bytes":""#.utf8)
            line.append(contentsOf: String(record.responseBytes).utf8)
            line.append(contentsOf: #"","client":"#.utf8)
            JSONValue.appendString(record.clientIP, to: &line)
            line.append(contentsOf: #","duration_ms":""#.utf8)
            line.append(contentsOf: milliseconds.utf8)
            line.append(contentsOf: #"","method":"#.utf8)
            JSONValue.appendString(record.method, to: &line)
            line.append(contentsOf: #","path":"#.utf8)
            JSONValue.appendString(record.path, to: &line)
            line.append(contentsOf: #","request_id":"#.utf8)
            JSONValue.appendString(record.requestID, to: &line)
            line.append(contentsOf: #","status":""#.utf8)
            line.append(contentsOf: String(record.status).utf8)
            line.append(contentsOf: "\"}\n".utf8)
        case .text:
            Timestamp.append(to: &line)
            let text = " INFO request bytes=\(record.responseBytes) client=\(record.clientIP) duration_ms=\(milliseconds) "
                + "method=\(record.method) path=\(record.path) request_id=\(record.requestID) status=\(record.status)\n"
            line.append(contentsOf: text.utf8)
        }
        output.write(line)
    }
}
