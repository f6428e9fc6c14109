import BrokerCrypto
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The append-only journal of changes since the last snapshot (`journal-<generation>.tbj`).
///
/// Group commit: changes are queued in the order they were made; one writer thread takes
/// everything queued, seals it as one frame, writes it and calls fdatasync once, then tells
/// every waiting change it is durable. Under load many changes share one fsync. A frame whose
/// write or sync fails is cut off and written again, for about ``retryPatience``, before its
/// changes are told they failed: what a change is told is what the file holds.
final class Journal: ChangeLog, @unchecked Sendable {
    // `@unchecked`: every mutable field is guarded by `queue`'s lock; the file descriptor and
    // frame counter are touched only by the writer thread (and by `rotate`, which runs on it).
    private enum Item {
        case records([UInt8], DurabilityTicket)
        case rotate(CheckedContinuation<Result<UInt64, StateWriteError>, Never>)
        case stop(CheckedContinuation<Void, Never>)
    }

    private let directory: String
    private let keys: StateKeys
    private let queue = Mutex(Queue())

    private struct Queue {
        var items: [Item] = []
        /// After `stop`: nothing more is written; late changes fail at once.
        var stopped = false
    }

    private static let stoppedError = StateWriteError(description: "the journal is closed (the broker is stopping)")
    private let wakeup = DispatchSemaphore(value: 0)
    private let bytesWritten = Atomic<Int>(0)
    /// Its writes' failures, from the first to the next success (logged once each way).
    private let outage: OutageWatch
    private let onCommit: @Sendable (Double) -> Void
    private let faults: StateFileFaults?
    private var file: OpenJournal

    /// Waits before writing a failed frame again: about 0.75 s in all.
    static let retryPatience: [Duration] = [.milliseconds(50), .milliseconds(100), .milliseconds(200), .milliseconds(400)]

    private struct OpenJournal {
        let generation: UInt64
        let path: String
        let descriptor: Int32
        let header: [UInt8]
        var frames: UInt64 = 0
        var size: Int
    }

    static func path(_ directory: String, generation: UInt64) -> String {
        "\(directory)/journal-\(String(format: "%08llu", generation)).tbj"
    }

    /// The generation of a journal file's name (`journal-00000042.tbj`), or nil for other names.
    static func generation(ofFileNamed name: String) -> UInt64? {
        guard name.hasPrefix("journal-"), name.hasSuffix(".tbj") else { return nil }
        return UInt64(name.dropFirst(8).dropLast(4))
    }

    /// Starts a new journal file of `generation` and the writer thread.
    /// `onCommit` hears each group commit's duration in seconds (for metrics); `faults` are a
    /// test's.
    init(directory: String, generation: UInt64, keys: StateKeys, outage: OutageWatch, faults: StateFileFaults? = nil,
         onCommit: @escaping @Sendable (Double) -> Void = { _ in }) throws(StateWriteError) {
        self.directory = directory
        self.keys = keys
        self.outage = outage
        self.onCommit = onCommit
        self.faults = faults
        file = try Self.create(directory, generation, keys)
        let thread = Thread { [self] in writerLoop() }
        thread.name = "token-broker.journal"
        thread.start()
    }

    /// Bytes in the current journal file.
    var size: Int { bytesWritten.load(ordering: .relaxed) }

    /// Why the last write failed, until a write succeeds again — a frame, or the next journal's
    /// creation at a snapshot (the disk took a whole new file: a full disk that was freed needs no
    /// client's write to be seen as mended).
    var failure: String? { outage.reason }

    func enqueue(_ records: [StateRecord]) -> DurabilityTicket {
        var plaintext: [UInt8] = []
        for record in records { record.encode(into: &plaintext) }
        let ticket = DurabilityTicket()
        let accepted = queue.withLock { queue in
            if !queue.stopped { queue.items.append(.records(plaintext, ticket)) }
            return !queue.stopped
        }
        guard accepted else {
            ticket.resolve(.failure(Self.stoppedError))
            return ticket
        }
        wakeup.signal()
        return ticket
    }

    /// Closes the current journal and starts the next generation; changes queued before this
    /// call are in the old file, later ones in the new. Returns the new generation.
    func rotate() async throws(StateWriteError) -> UInt64 {
        let result = await withCheckedContinuation { continuation in
            submit(.rotate(continuation))
        }
        return try result.get()
    }

    /// Writes what is queued and stops the writer thread.
    func stop() async {
        await withCheckedContinuation { continuation in
            submit(.stop(continuation))
        }
    }

    /// Queues `item` for the writer, or settles it at once when the journal is already stopped.
    private func submit(_ item: Item) {
        let accepted = queue.withLock { queue in
            if !queue.stopped { queue.items.append(item) }
            return !queue.stopped
        }
        if accepted { wakeup.signal() } else { Self.refuse(item) }
    }

    private static func refuse(_ item: Item) {
        switch item {
        case .records(_, let ticket): ticket.resolve(.failure(stoppedError))
        case .rotate(let continuation): continuation.resume(returning: .failure(stoppedError))
        case .stop(let continuation): continuation.resume()
        }
    }

    private func writerLoop() {
        while true {
            wakeup.wait()
            let items = queue.withLock { queue in
                defer { queue.items.removeAll(keepingCapacity: true) }
                return queue.items
            }
            var batch: [UInt8] = []
            var tickets: [DurabilityTicket] = []
            for (position, item) in items.enumerated() {
                switch item {
                case .records(let bytes, let ticket):
                    batch += bytes
                    tickets.append(ticket)
                case .rotate(let continuation):
                    commit(&batch, &tickets)
                    let result: Result<UInt64, StateWriteError>
                    do {
                        result = .success(try rotateFile())
                    } catch {
                        result = .failure(error)
                    }
                    continuation.resume(returning: result)
                case .stop(let continuation):
                    commit(&batch, &tickets)
                    close(file.descriptor)
                    let late = queue.withLock { queue in
                        queue.stopped = true
                        defer { queue.items.removeAll() }
                        return queue.items
                    }
                    for item in items[(position + 1)...] + late { Self.refuse(item) }
                    continuation.resume()
                    return
                }
            }
            commit(&batch, &tickets)
        }
    }

    /// Writes `batch` as one frame, syncs, and resolves its tickets; a failed frame is cut off and
    /// written again (``retryPatience``) before they are told it failed.
    private func commit(_ batch: inout [UInt8], _ tickets: inout [DurabilityTicket]) {
        guard !tickets.isEmpty else { return }
        defer {
            batch.removeAll(keepingCapacity: true)
            tickets.removeAll(keepingCapacity: true)
        }
        let started = ContinuousClock.now
        defer { onCommit((ContinuousClock.now - started).seconds) }
        var result = write(batch)
        for pause in Self.retryPatience {
            guard case .failure = result else { break }
            Thread.sleep(forTimeInterval: Double(pause.components.attoseconds) / 1e18)
            result = write(batch)
        }
        switch result {
        case .success: outage.succeeded()
        case .failure(let error): outage.failed(error.description)
        }
        for ticket in tickets { ticket.resolve(result) }
    }

    /// One attempt at `batch` as the next frame: written and synced, or cut off the file again
    /// (so that later frames follow a complete one) and the reason.
    private func write(_ batch: [UInt8]) -> Result<Void, StateWriteError> {
        do {
            let frame = try FrameLayout.seal(batch, type: .records, index: file.frames, header: file.header, key: keys.current)
            try StateFileIO.writeAll(file.descriptor, frame, path: file.path)
            try StateFileIO.sync(file.descriptor, path: file.path)
            // A test's fault: the frame is on disk, and its sync is reported failed all the same.
            if faults?.takeFailedSync() == true { throw StateFileIO.Failure(description: "the sync was reported failed (a test's fault)") }
            file.frames += 1
            file.size += frame.count
            bytesWritten.store(file.size, ordering: .relaxed)
            return .success(())
        } catch {
            // The file is not opened for appending: the next frame is written where this one
            // began, not after the part of it that was cut off.
            _ = ftruncate(file.descriptor, off_t(file.size))
            _ = lseek(file.descriptor, off_t(file.size), SEEK_SET)
            return .failure(StateWriteError(description: "the journal \(file.path) could not be written: \(error)"))
        }
    }

    private func rotateFile() throws(StateWriteError) -> UInt64 {
        let next = try Self.create(directory, file.generation + 1, keys)
        close(file.descriptor)
        file = next
        bytesWritten.store(next.size, ordering: .relaxed)
        outage.succeeded()
        return next.generation
    }

    private static func create(_ directory: String, _ generation: UInt64, _ keys: StateKeys) throws(StateWriteError) -> OpenJournal {
        let path = path(directory, generation: generation)
        let header = StateFileHeader(kind: .journal, keyID: keys.currentID, generation: generation, createdAt: UInt64(Date().timeIntervalSince1970)).bytes
        let descriptor: Int32
        do {
            descriptor = try StateFileIO.openForWriting(path, truncate: true)
        } catch {
            throw StateWriteError(description: error.description)
        }
        do {
            try StateFileIO.writeAll(descriptor, header, path: path)
            try StateFileIO.sync(descriptor, path: path)
            try StateFileIO.syncDirectory(directory)
            return OpenJournal(generation: generation, path: path, descriptor: descriptor, header: header, size: header.count)
        } catch {
            // A full disk fails this again at each snapshot, every second while the journal is
            // past its bound: each attempt's descriptor is closed, or they would run out.
            close(descriptor)
            throw StateWriteError(description: error.description)
        }
    }
}
