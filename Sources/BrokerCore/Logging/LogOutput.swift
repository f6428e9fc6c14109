import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPServer
import Synchronization

/// Where log lines go: standard output, or memory for tests.
///
/// Two ways in. `write` is for events (start, warnings, errors): the line, and every access-log
/// line accepted before it, is on standard output when `write` returns. `writeSoon` is for the
/// access log, one line per request: the server thread packs the request's facts
/// (`AccessEntry`) into a bounded buffer, and a writer thread formats a batch of them and
/// writes it in one `write` call every couple of milliseconds — as nginx's `access_log …
/// buffer=` does. One system call per request, with the file's lock shared by every server
/// thread, cost as much as the rest of a `GET /token` (docs/benchmark-history.md); once
/// batched, formatting the line was most of what the log still cost the server thread
/// (docs/benchmark.md). When the buffer is full (the descriptor is slower than
/// the requests), the line is dropped and `writeSoon` says so — a request never waits for the
/// log. What waits in the buffer when the process is killed (`SIGKILL`; a crash) is lost: at
/// most the last few milliseconds of access-log lines. A clean shutdown writes everything
/// (`flush`). Lines never interleave; one thread's lines keep their order, and a batch groups
/// lines by thread (see `PendingLines`).
public final class LogOutput: Sendable {
    private enum Target {
        case fileDescriptor(Int32)
        case memory
    }

    private let target: Target
    private let captured = Mutex<[String]>([])
    /// Access-log entries accepted by `writeSoon` and not yet written.
    private let pending = PendingLines()
    /// Held while bytes go to the descriptor, so that batches and events keep their order; it
    /// guards the buffers of the batch being written.
    private let writing = Mutex(Batch())

    private struct Batch {
        /// Entries taken from `pending`.
        var entries: [UInt8] = []
        /// Their lines, and the event after them.
        var lines: [UInt8] = []
    }

    /// How long the writer gathers lines after the first one of a batch arrives.
    private static let gatherMicroseconds: UInt32 = 2_000
    /// Past this many waiting bytes of entries in its stripe (about 10,000 lines, a fifth of a
    /// second of a busy server thread: the descriptor is slower than the requests, or the writer
    /// thread gets no CPU), a thread's `writeSoon` drops its lines.
    private static let maxPendingBytesPerStripe = 1 << 20
    /// A batch buffer grown past this (a burst) is let go after its write rather than kept.
    private static let keptBatchCapacity = 1 << 20

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

    /// Writes `line` (ending in a newline) now, after the lines waiting in the buffer.
    func write(_ line: [UInt8]) {
        switch target {
        case .fileDescriptor(let descriptor):
            writeWaiting(then: line, to: descriptor)
        case .memory:
            captured.withLock { $0.append(String(decoding: line.dropLast(), as: UTF8.self)) }
        }
    }

    /// Packs `record`, answered now, into the buffer the writer thread empties (in memory: writes
    /// its line at once). False when the buffer is full: the line is dropped.
    func writeSoon(_ record: RequestRecord, style: LogLineHandler.Style, label: String) -> Bool {
        let time = Date().timeIntervalSince1970
        switch target {
        case .fileDescriptor:
            let size = AccessEntry.size(of: record, label: label)
            let outcome = pending.add(size, limit: Self.maxPendingBytesPerStripe) { entries in
                AccessEntry.pack(record, time: time, style: style, label: label, into: &entries)
            }
            switch outcome {
            case .added:
                return true
            case .startWriter:
                startWriter()
                return true
            case .full:
                return false
            }
        case .memory:
            var entry: [UInt8] = []
            AccessEntry.pack(record, time: time, style: style, label: label, into: &entry)
            var line: [UInt8] = []
            AccessLog.appendLines(of: entry, to: &line)
            write(line)
            return true
        }
    }

    /// Writes whatever waits in the buffer.
    func flush() {
        guard case .fileDescriptor(let descriptor) = target else { return }
        writeWaiting(then: [], to: descriptor)
    }

    /// Writes the lines of the buffer's entries, then `line`, in one call, holding `writing` so
    /// that nothing written meanwhile can come between or before them.
    private func writeWaiting(then line: [UInt8], to descriptor: Int32) {
        writing.withLock { batch in
            pending.take(into: &batch.entries)
            AccessLog.appendLines(of: batch.entries, to: &batch.lines)
            batch.lines += line
            Self.writeAll(batch.lines, to: descriptor)
            Self.empty(&batch.entries)
            Self.empty(&batch.lines)
        }
    }

    /// Empties a batch buffer, keeping its memory unless a burst grew it past `keptBatchCapacity`.
    private static func empty(_ buffer: inout [UInt8]) {
        if buffer.capacity > keptBatchCapacity {
            buffer = []
        } else {
            buffer.removeAll(keepingCapacity: true)
        }
    }

    private func startWriter() {
        let thread = Thread { [self] in
            while true {
                pending.waitForLines()
                usleep(Self.gatherMicroseconds)
                flush()
            }
        }
        thread.name = "log-writer"
        thread.start()
    }

    private static func writeAll(_ bytes: [UInt8], to descriptor: Int32) {
        bytes.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0 && errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
    }
}

/// The access-log entries waiting for the writer thread, and the writer's wake-up: it sleeps
/// until the first entry of a batch arrives, so a quiet broker costs nothing. A stripe whose
/// entries the writer takes gets the writer's emptied buffer in exchange, so that adding to it
/// allocates nothing once the buffers have grown.
///
/// Each thread adds to its own stripe (the first `stripeCount` threads to log get one each —
/// the server threads first, as they log every request; later ones, such as the task threads
/// that answer deferred requests, share): the server threads never wait for one another's lock,
/// nor pass one buffer's cache lines back and forth on every request. A thread's lines keep
/// their order; in a batch, the lines of each stripe follow those of the stripe before, so
/// timestamps of different threads' lines may step back by up to a batch (~2 ms).
private final class PendingLines: Sendable {
    private final class Stripe: Sendable {
        let bytes = Mutex<[UInt8]>([])
        /// Keeps the next stripe's lock off this one's cache line (objects are allocated side by
        /// side).
        private let padding: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
    }

    private static let stripeCount = 8
    private let stripes = (0..<PendingLines.stripeCount).map { _ in Stripe() }
    private let writerStarted = Atomic<Bool>(false)
    /// Set by the writer, with `condition` locked, before it looks at the stripes a last time
    /// and sleeps; a thread that adds a line and then sees it set wakes the writer. (Either the
    /// writer's look at a stripe comes after the line was added, or the adding thread took that
    /// stripe's lock after the writer and so sees the flag.)
    private let writerWaiting = Atomic<Bool>(false)
    private let condition = NSCondition()

    enum Outcome {
        case added
        /// Added, and the caller must start the writer thread (once per output).
        case startWriter
        /// Not added: the thread's stripe is full.
        case full
    }

    /// Has `append` add `count` bytes to the calling thread's stripe, unless that would put more
    /// than `limit` bytes in it.
    func add(_ count: Int, limit: Int, _ append: (inout [UInt8]) -> Void) -> Outcome {
        let added = stripes[Self.threadSlot() % Self.stripeCount].bytes.withLock { bytes in
            guard bytes.count + count <= limit else { return false }
            append(&bytes)
            return true
        }
        guard added else { return .full }
        if !writerStarted.load(ordering: .relaxed),
           writerStarted.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged {
            return .startWriter
        }
        if writerWaiting.load(ordering: .sequentiallyConsistent) {
            condition.lock()
            if writerWaiting.exchange(false, ordering: .sequentiallyConsistent) { condition.signal() }
            condition.unlock()
        }
        return .added
    }

    /// Moves the waiting bytes to the end of `batch`.
    func take(into batch: inout [UInt8]) {
        for stripe in stripes {
            stripe.bytes.withLock { bytes in
                if batch.isEmpty {
                    swap(&batch, &bytes)
                } else {
                    batch += bytes
                    bytes.removeAll(keepingCapacity: true)
                }
            }
        }
    }

    /// Returns once there are lines waiting.
    func waitForLines() {
        condition.lock()
        defer { condition.unlock() }
        while true {
            writerWaiting.store(true, ordering: .sequentiallyConsistent)
            if stripes.contains(where: { stripe in stripe.bytes.withLock { !$0.isEmpty } }) {
                writerWaiting.store(false, ordering: .sequentiallyConsistent)
                return
            }
            condition.wait()
        }
    }

    /// The calling thread's number, given in the order threads first ask.
    private static func threadSlot() -> Int {
        if let slot = pthread_getspecific(slotKey) { return Int(bitPattern: slot) - 1 }
        let slot = nextSlot.wrappingAdd(1, ordering: .relaxed).oldValue
        // Unrecorded (no memory for it), the thread would get a new slot on every call, and its
        // lines could reorder: it shares the first stripe instead.
        guard pthread_setspecific(slotKey, UnsafeRawPointer(bitPattern: slot + 1)) == 0 else { return 0 }
        return slot
    }

    private static let slotKey: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "LogOutput: no thread-specific key left")
        return key
    }()
    private static let nextSlot = Atomic<Int>(0)
}
