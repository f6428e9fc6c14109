import HTTPServer

/// What a log line is, for the room it gets in the log's buffer and the count of those dropped.
public enum LogLineKind: UInt8, CaseIterable, Sendable {
    /// An access-log line: one per request.
    case access
    /// An event: the start, a sign-in's step, a warning, an error.
    case event
    /// An audit line (``AuditTrail``).
    case audit
}

/// The log's lines as they wait in its buffer for the writer thread (`PendingLines`), in the
/// order each thread gave them: each entry is its kind's byte (`LogLineKind`), then, for an
/// access-log line, the request's packed facts (`AccessEntry`: the writer formats them), for any
/// other line its length (four bytes, in the machine's byte order) and its bytes, formatted by
/// the thread that logged it.
enum LogEntries {
    /// The bytes `record` takes as an entry.
    static func accessSize(of record: RequestRecord, label: String) -> Int {
        1 + AccessEntry.size(of: record, label: label)
    }

    /// Appends `record`, answered at `time` (seconds since the Unix epoch), to `bytes`.
    static func appendAccess(_ record: RequestRecord, time: Double, style: LogLineHandler.Style, label: String,
                             to bytes: inout [UInt8]) {
        bytes.append(LogLineKind.access.rawValue)
        AccessEntry.pack(record, time: time, style: style, label: label, into: &bytes)
    }

    /// The bytes `line` takes as an entry.
    static func lineSize(of line: [UInt8]) -> Int {
        1 + MemoryLayout<UInt32>.size + line.count
    }

    /// Appends `line` (ending in a newline), of `kind` (not `access`), to `bytes`.
    static func appendLine(_ line: [UInt8], kind: LogLineKind, to bytes: inout [UInt8]) {
        bytes.append(kind.rawValue)
        withUnsafeBytes(of: UInt32(line.count)) { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: line)
    }

    /// Where a line ends in the text of a batch (the offset past its newline), and its kind.
    struct LineEnd {
        var offset: Int
        var kind: LogLineKind
    }

    /// Appends the line of every entry in `entries` to `text`, and where each ends to `ends`.
    static func format(_ entries: [UInt8], to text: inout [UInt8], ends: inout [LineEnd]) {
        entries.withUnsafeBufferPointer { buffer in
            var offset = 0
            while offset < buffer.count {
                let kind = LogLineKind(rawValue: buffer[offset]) ?? .event
                offset += 1
                if kind == .access {
                    AccessLog.appendLine(AccessEntry.read(from: buffer, at: &offset), to: &text)
                } else {
                    let count = Int(UnsafeRawBufferPointer(buffer).loadUnaligned(fromByteOffset: offset, as: UInt32.self))
                    offset += MemoryLayout<UInt32>.size
                    text.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[offset..<(offset + count)]))
                    offset += count
                }
                ends.append(LineEnd(offset: text.count, kind: kind))
            }
        }
    }
}
