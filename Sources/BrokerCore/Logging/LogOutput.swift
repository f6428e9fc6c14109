import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPServer
import Synchronization

/// Where log lines go: standard output, or memory for tests.
///
/// No thread but the output's own writer waits for standard output. Every line — an event
/// (`write`) or a request's access-log line (`writeSoon`) — goes into a bounded buffer, in the
/// calling thread's stripe (`PendingLines`), and a writer thread writes a batch of them in one
/// `write` call every couple of milliseconds, as nginx's `access_log … buffer=` does. An
/// access-log line waits as the request's packed facts (`AccessEntry`): one system call per
/// request, with the file's lock shared by every server thread, cost as much as the rest of a
/// `GET /token` (docs/benchmark-history.md); once batched, formatting the line was most of what
/// the log still cost the server thread (docs/benchmark.md). An event waits formatted. Events
/// are logged on the Swift executor's few threads (two on a 2-core machine): when an event was
/// written at once, a standard output that stopped draining (a pipe nobody reads) held every one
/// of them in `write`, and every request with async work waited for the log.
///
/// When a thread's stripe is full (the descriptor is slower than the lines, or takes none), the
/// line is dropped and counted (`dropped(_:)`) — a request never waits for the log. Events have
/// room past where access-log lines stop, and audit lines past that (`limit(for:)`): a flood of
/// requests against a slow output drops request lines first, and an audit line is dropped only
/// once the output has taken nothing while hundreds of kilobytes of lines came. An audit line
/// does not wait either, not even for a bounded time: it is logged on an executor thread too,
/// and `broker_audit_events_total` counts every audit event, written or not. What waits in the
/// buffer when the process is killed (`SIGKILL`; a crash) is lost: at most the last few
/// milliseconds of lines. A clean shutdown writes everything (`flush`). When the descriptor
/// fails (`EPIPE`: its reader is gone, as `| head` does once it has its lines; `serve` ignores
/// `SIGPIPE`, which would end the process), the lines it refused are dropped and counted too. Lines never interleave;
/// one thread's lines keep their order, and a batch groups lines by thread (see `PendingLines`).
public final class LogOutput: Sendable {
    private enum Target {
        case fileDescriptor(Int32)
        case memory
    }

    private let target: Target
    private let captured = Mutex<[String]>([])
    /// Entries accepted by `write` and `writeSoon` and not yet written.
    private let pending = PendingLines()
    /// Held while bytes go to the descriptor, so that batches keep their order; it guards the
    /// buffers of the batch being written.
    private let writing = Mutex(Batch())
    private let droppedAccess = Atomic<Int>(0)
    private let droppedEvents = Atomic<Int>(0)
    private let droppedAudit = Atomic<Int>(0)

    private struct Batch {
        /// Entries taken from `pending`.
        var entries: [UInt8] = []
        /// Their lines.
        var lines: [UInt8] = []
        /// Where each line ends in `lines`.
        var ends: [LogEntries.LineEnd] = []
    }

    /// How long the writer gathers lines after the first one of a batch arrives, unless an event
    /// is among them.
    private static let gatherMicroseconds: UInt32 = 2_000
    /// A batch buffer grown past this many bytes (a burst) is let go after its write rather than
    /// kept.
    private static let keptBatchCapacity = 1 << 20

    /// Past this many waiting bytes in its stripe, a thread's lines of `kind` are dropped. For
    /// access-log lines, about 10,000 of them, a fifth of a second of a busy server thread (the
    /// descriptor is slower than the requests, or the writer thread gets no CPU); events have a
    /// quarter of a megabyte more (about 1,000 lines), audit lines another quarter that events
    /// cannot take.
    private static func limit(for kind: LogLineKind) -> Int {
        switch kind {
        case .access: 1 << 20
        case .event: (1 << 20) + (1 << 18)
        case .audit: (1 << 20) + (1 << 19)
        }
    }

    private init(_ target: Target) {
        self.target = target
    }

    public static let standardOutput = LogOutput(.fileDescriptor(STDOUT_FILENO))

    /// Writes to an open descriptor (which stays open: the output never closes it).
    static func descriptor(_ descriptor: Int32) -> LogOutput { LogOutput(.fileDescriptor(descriptor)) }

    /// Keeps lines in memory (see `lines`).
    public static func memory() -> LogOutput { LogOutput(.memory) }

    /// The lines written so far, for an in-memory output.
    public var lines: [String] { captured.withLock { $0 } }

    /// The lines of `kind` dropped so far.
    public func dropped(_ kind: LogLineKind) -> Int {
        switch kind {
        case .access: droppedAccess.load(ordering: .relaxed)
        case .event: droppedEvents.load(ordering: .relaxed)
        case .audit: droppedAudit.load(ordering: .relaxed)
        }
    }

    /// Hands `line` (ending in a newline), of `kind` (not `access`), to the writer thread (in
    /// memory: keeps it at once). It is dropped when the calling thread's stripe is full.
    func write(_ line: [UInt8], kind: LogLineKind) {
        switch target {
        case .fileDescriptor:
            queue(kind, size: LogEntries.lineSize(of: line)) { LogEntries.appendLine(line, kind: kind, to: &$0) }
        case .memory:
            captured.withLock { $0.append(String(decoding: line.dropLast(), as: UTF8.self)) }
        }
    }

    /// Packs `record`, answered now, into the buffer the writer thread empties (in memory: keeps
    /// its line at once). False when the buffer is full: the line is dropped.
    @discardableResult
    func writeSoon(_ record: RequestRecord, style: LogLineHandler.Style, label: String) -> Bool {
        let time = Date().timeIntervalSince1970
        switch target {
        case .fileDescriptor:
            return queue(.access, size: LogEntries.accessSize(of: record, label: label)) { entries in
                LogEntries.appendAccess(record, time: time, style: style, label: label, to: &entries)
            }
        case .memory:
            var entry: [UInt8] = []
            LogEntries.appendAccess(record, time: time, style: style, label: label, to: &entry)
            var line: [UInt8] = []
            var ends: [LogEntries.LineEnd] = []
            LogEntries.format(entry, to: &line, ends: &ends)
            captured.withLock { $0.append(String(decoding: line.dropLast(), as: UTF8.self)) }
            return true
        }
    }

    /// Writes whatever waits in the buffer, and returns once it is written: at a clean stop, or
    /// before exiting on an error. It waits for the descriptor, as the writer thread does.
    public func flush() {
        guard case .fileDescriptor(let descriptor) = target else { return }
        writing.withLock { batch in
            pending.take(into: &batch.entries)
            LogEntries.format(batch.entries, to: &batch.lines, ends: &batch.ends)
            let written = Self.writeAll(batch.lines, to: descriptor)
            for end in batch.ends where end.offset > written {
                countDropped(end.kind)
            }
            Self.empty(&batch.entries)
            Self.empty(&batch.lines)
            Self.empty(&batch.ends)
        }
    }

    /// Has `append` add an entry of `size` bytes to the calling thread's stripe, or counts the
    /// line dropped when the stripe has no room for it.
    @discardableResult
    private func queue(_ kind: LogLineKind, size: Int, _ append: (inout [UInt8]) -> Void) -> Bool {
        switch pending.add(size, limit: Self.limit(for: kind), event: kind != .access, append) {
        case .added:
            return true
        case .startWriter:
            startWriter()
            return true
        case .full:
            countDropped(kind)
            return false
        }
    }

    private func countDropped(_ kind: LogLineKind, _ count: Int = 1) {
        switch kind {
        case .access: droppedAccess.add(count, ordering: .relaxed)
        case .event: droppedEvents.add(count, ordering: .relaxed)
        case .audit: droppedAudit.add(count, ordering: .relaxed)
        }
    }

    /// Empties a batch buffer, keeping its memory unless a burst grew it past `keptBatchCapacity`.
    private static func empty<Element>(_ buffer: inout [Element]) {
        if buffer.capacity * MemoryLayout<Element>.stride > keptBatchCapacity {
            buffer = []
        } else {
            buffer.removeAll(keepingCapacity: true)
        }
    }

    private func startWriter() {
        let thread = Thread { [self] in
            while true {
                pending.waitForLines()
                if !pending.takeEventWaiting() { usleep(Self.gatherMicroseconds) }
                flush()
            }
        }
        thread.name = "log-writer"
        thread.start()
    }

    /// Writes `bytes` to `descriptor`, and returns how many it took: fewer when it failed
    /// (`EPIPE`, its reader gone; `EIO`; `ENOSPC`).
    private static func writeAll(_ bytes: [UInt8], to descriptor: Int32) -> Int {
        bytes.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0 && errno == EINTR {
                    continue
                } else {
                    break
                }
            }
            return offset
        }
    }
}
