import HTTPServer

/// The facts of one access-log line, packed into bytes. A server thread packs them for each
/// request — a copy of a few numbers and short strings to the end of a buffer that keeps its
/// capacity: no allocation, no formatting — and the log's writer thread unpacks a batch of
/// them and writes their lines (`LogEntries.format`), as nginx's `access_log … buffer=` does.
///
/// Packed, in the machine's byte order at any alignment: the time and the duration (`Double`
/// seconds), the status and the response's bytes (`Int`), the style (one byte), then the
/// logger's label, the method, the path, the client, the proxy, the request id and the trace id,
/// each as a two-byte length and its UTF-8 bytes (the proxy's and the trace id's length is
/// `UInt16.max` when there is none).
/// Each entry carries its style and label, so that the writer formats it without knowing which
/// access log packed it.
struct AccessEntry {
    var time: Double
    var seconds: Double
    var status: Int
    var responseBytes: Int
    var style: LogLineHandler.Style
    var label: UnsafeBufferPointer<UInt8>
    var method: UnsafeBufferPointer<UInt8>
    var path: UnsafeBufferPointer<UInt8>
    var clientIP: UnsafeBufferPointer<UInt8>
    var proxyIP: UnsafeBufferPointer<UInt8>?
    var requestID: UnsafeBufferPointer<UInt8>
    var traceID: UnsafeBufferPointer<UInt8>?

    private static let numberBytes = 2 * MemoryLayout<Double>.size + 2 * MemoryLayout<Int>.size + 1
    /// The length of an absent proxy or trace id.
    private static let absent = UInt16.max
    /// A longer string is cut (none is: the server cuts paths at 256 bytes, ids at 64).
    private static let maxStringBytes = Int(UInt16.max - 1)

    /// The bytes `record` takes packed.
    static func size(of record: RequestRecord, label: String) -> Int {
        numberBytes + 7 * MemoryLayout<UInt16>.size
            + stringBytes(label) + stringBytes(record.method) + stringBytes(record.path)
            + stringBytes(record.clientIP) + (record.proxyIP.map(stringBytes) ?? 0) + stringBytes(record.requestID)
            + (record.traceID?.utf8.count ?? 0)
    }

    /// Appends `record`, answered at `time` (seconds since the Unix epoch), to `bytes`.
    static func pack(_ record: RequestRecord, time: Double, style: LogLineHandler.Style, label: String, into bytes: inout [UInt8]) {
        append(time, to: &bytes)
        append(record.seconds, to: &bytes)
        append(record.status, to: &bytes)
        append(record.responseBytes, to: &bytes)
        bytes.append(style == .json ? 0 : 1)
        append(label, to: &bytes)
        append(record.method, to: &bytes)
        append(record.path, to: &bytes)
        append(record.clientIP, to: &bytes)
        if let proxyIP = record.proxyIP {
            append(proxyIP, to: &bytes)
        } else {
            append(absent, to: &bytes)
        }
        append(record.requestID, to: &bytes)
        if let traceID = record.traceID {
            append(UInt16(traceID.utf8.count), to: &bytes)
            bytes.append(contentsOf: traceID.utf8)
        } else {
            append(absent, to: &bytes)
        }
    }

    /// The entry packed at `offset` in `buffer`, whose strings point into `buffer`; moves `offset`
    /// past it.
    static func read(from buffer: UnsafeBufferPointer<UInt8>, at offset: inout Int) -> AccessEntry {
        var reader = Reader(buffer: buffer, offset: offset)
        defer { offset = reader.offset }
        let time: Double = reader.number()
        let seconds: Double = reader.number()
        let status: Int = reader.number()
        let responseBytes: Int = reader.number()
        let style: LogLineHandler.Style = reader.byte() == 0 ? .json : .text
        let label = reader.string(), method = reader.string(), path = reader.string(), clientIP = reader.string()
        let proxyIP = reader.optionalString()
        let requestID = reader.string()
        return AccessEntry(time: time, seconds: seconds, status: status, responseBytes: responseBytes, style: style,
                           label: label, method: method, path: path, clientIP: clientIP,
                           proxyIP: proxyIP, requestID: requestID, traceID: reader.optionalString())
    }

    private static func stringBytes(_ text: String) -> Int {
        min(text.utf8.count, maxStringBytes)
    }

    private static func append<Number: BitwiseCopyable>(_ number: Number, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: number) { bytes.append(contentsOf: $0) }
    }

    private static func append(_ text: String, to bytes: inout [UInt8]) {
        let count = stringBytes(text)
        append(UInt16(count), to: &bytes)
        // A native string lends its UTF-8 in place (a short one from the stack); others are
        // copied byte by byte.
        let lent: Void? = text.utf8.withContiguousStorageIfAvailable { utf8 in
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[..<count]))
        }
        if lent == nil { bytes.append(contentsOf: text.utf8.prefix(count)) }
    }

    /// Reads packed entries in order.
    private struct Reader {
        let buffer: UnsafeBufferPointer<UInt8>
        var offset: Int

        mutating func number<Number: BitwiseCopyable>() -> Number {
            defer { offset += MemoryLayout<Number>.size }
            return UnsafeRawBufferPointer(buffer).loadUnaligned(fromByteOffset: offset, as: Number.self)
        }

        mutating func byte() -> UInt8 {
            defer { offset += 1 }
            return buffer[offset]
        }

        mutating func string() -> UnsafeBufferPointer<UInt8> {
            optionalString() ?? UnsafeBufferPointer(start: nil, count: 0)
        }

        mutating func optionalString() -> UnsafeBufferPointer<UInt8>? {
            let count: UInt16 = number()
            guard count != AccessEntry.absent else { return nil }
            defer { offset += Int(count) }
            return UnsafeBufferPointer(rebasing: buffer[offset..<(offset + Int(count))])
        }
    }
}
