import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The log's entries (`LogEntries`) waiting for the writer thread, and the writer's wake-up: it
/// sleeps until the first entry of a batch arrives, so a quiet broker costs nothing. A stripe
/// whose entries the writer takes gets the writer's emptied buffer in exchange, so that adding to
/// it allocates nothing once the buffers have grown.
///
/// Each thread adds to its own stripe: a thread whose first line is a request's (a server thread:
/// it logs every request) gets one of the first `stripesPerRange` stripes, in turn, a thread
/// whose first line is an event (the task threads that log the start, the watchdog) one of the
/// others, so that the threads logging at start never take the server threads' stripes. The
/// server threads never wait for one another's lock, nor pass one buffer's cache lines back and
/// forth on every request (past `stripesPerRange` of them, they share). A thread's lines keep their order; in a batch,
/// the lines of each stripe follow those of the stripe before, so timestamps of different
/// threads' lines may step back by up to a batch (~2 ms).
final class PendingLines: Sendable {
    private final class Stripe: Sendable {
        let bytes = Mutex<[UInt8]>([])
        /// Keeps the next stripe's lock off this one's cache line (objects are allocated side by
        /// side).
        private let padding: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
    }

    private static let stripesPerRange = 8
    private let stripes = (0..<(2 * PendingLines.stripesPerRange)).map { _ in Stripe() }
    private let writerStarted = Atomic<Bool>(false)
    /// Set by the writer, with `condition` locked, before it looks at the stripes a last time
    /// and sleeps; a thread that adds a line and then sees it set wakes the writer. (Either the
    /// writer's look at a stripe comes after the line was added, or the adding thread took that
    /// stripe's lock after the writer and so sees the flag.)
    private let writerWaiting = Atomic<Bool>(false)
    /// Set when an event waits: the writer writes without gathering more (an event is read by
    /// people and tests as it happens; access-log lines are the many).
    private let eventWaiting = Atomic<Bool>(false)
    private let condition = NSCondition()

    enum Outcome {
        case added
        /// Added, and the caller must start the writer thread (once per output).
        case startWriter
        /// Not added: the thread's stripe is full.
        case full
    }

    /// Has `append` add `count` bytes to the calling thread's stripe, unless that would put more
    /// than `limit` bytes in it; an `event` (not an access-log line) is written without waiting
    /// for a batch to gather.
    func add(_ count: Int, limit: Int, event: Bool, _ append: (inout [UInt8]) -> Void) -> Outcome {
        let added = stripes[Self.stripe(firstLineAnEvent: event)].bytes.withLock { bytes in
            guard bytes.count + count <= limit else { return false }
            append(&bytes)
            return true
        }
        guard added else { return .full }
        if event { eventWaiting.store(true, ordering: .relaxed) }
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

    /// Whether an event waits among the lines (and forgets it: the writer is taking them).
    func takeEventWaiting() -> Bool {
        eventWaiting.exchange(false, ordering: .relaxed)
    }

    /// The calling thread's stripe, given when it first asks: in turn among the first range's
    /// stripes when that first line is a request's, else among the second range's.
    private static func stripe(firstLineAnEvent event: Bool) -> Int {
        if let slot = pthread_getspecific(slotKey) { return Int(bitPattern: slot) - 1 }
        let turn = event ? nextEventSlot.wrappingAdd(1, ordering: .relaxed).oldValue
            : nextRequestSlot.wrappingAdd(1, ordering: .relaxed).oldValue
        let slot = turn % stripesPerRange + (event ? stripesPerRange : 0)
        // Unrecorded (no memory for it), the thread would get a new stripe on every call, and its
        // lines could reorder: it shares the first stripe instead.
        guard pthread_setspecific(slotKey, UnsafeRawPointer(bitPattern: slot + 1)) == 0 else { return 0 }
        return slot
    }

    private static let slotKey: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "LogOutput: no thread-specific key left")
        return key
    }()
    private static let nextRequestSlot = Atomic<Int>(0)
    private static let nextEventSlot = Atomic<Int>(0)
}
