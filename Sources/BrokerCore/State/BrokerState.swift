import BrokerCrypto
import Foundation
import Logging
import Synchronization

/// The state on one machine: in memory (sharded sessions, logins, handoff codes), made durable
/// by an encrypted journal plus periodic snapshots in the state directory (README, "State").
final class BrokerState: StateStore {
    let sessions: SessionStore
    let flows: FlowStore
    private let disk: Disk?
    private let logger: Logger
    private let metrics: BrokerMetrics?
    private let snapshotting = Atomic<Bool>(false)
    private let snapshotFailure = Mutex<String?>(nil)
    /// The start set damage aside (`--accept-damaged-state`): what was read is not yet a base.
    let startedPastDamage: Bool

    /// Where and how the state is kept on disk.
    struct Disk: Sendable {
        let directory: String
        let keys: StateKeys
        let journal: Journal
    }

    /// Memory only (development mode without a state key).
    init(lifetimes: SessionLifetimes, logger: Logger) {
        sessions = SessionStore(log: MemoryOnly(), lifetimes: lifetimes)
        flows = FlowStore(log: MemoryOnly())
        disk = nil
        self.logger = logger
        metrics = nil
        startedPastDamage = false
    }

    /// Locks `directory` for this process, loads the state from it (snapshot, then journals) and
    /// starts a new journal.
    init(
        directory: String, keys: StateKeys, lifetimes: SessionLifetimes, acceptDamage: Bool, logger: Logger,
        metrics: BrokerMetrics? = nil
    ) throws(StateOpenError) {
        do {
            try StateFileIO.createDirectory(directory)
            try StateDirectoryLock.acquire(directory)
        } catch {
            throw StateOpenError(description: error.description)
        }
        let started = ContinuousClock.now
        // Recovered records are applied without logging; the journal takes over afterwards.
        let log = SwitchableLog()
        let sessions = SessionStore(log: log, lifetimes: lifetimes)
        let flows = FlowStore(log: log)
        let report: StateRecovery.Report
        do {
            report = try StateRecovery.load(directory: directory, keys: keys, acceptDamage: acceptDamage) { record in
                switch record {
                case .session(let session): sessions.restore(session)
                case .sessionRemoved(let id): sessions.restoreRemoval(id)
                case .pending, .pendingRemoved, .handoff: flows.restore(record)
                }
            }
        } catch {
            let advice = error.isDamage
                ? "To start anyway with what can be read, run with --accept-damaged-state (the damaged file is kept aside)."
                : "Configure the key the file was written with (state keys: the current key first, older keys after it)."
            throw StateOpenError(description: "\(error.description)\nThe broker did not start. \(advice)")
        }
        let journal: Journal
        do {
            journal = try Journal(directory: directory, generation: report.nextGeneration, keys: keys) { seconds in
                metrics?.journalCommitted(seconds: seconds)
            }
        } catch {
            throw StateOpenError(description: error.description)
        }
        log.switchTo(journal)
        self.sessions = sessions
        self.flows = flows
        disk = Disk(directory: directory, keys: keys, journal: journal)
        self.logger = logger
        self.metrics = metrics
        startedPastDamage = !report.damaged.isEmpty
        for torn in report.tornTails {
            logger.warning("dropped a torn journal record (a crash during its write, never acknowledged)", metadata: [
                "file": "\(torn.path)", "offset": "\(torn.offset)", "size": "\(torn.size)",
            ])
        }
        for damage in report.damaged {
            logger.error("damaged state file set aside; started with what could be read", metadata: ["problem": "\(damage.description)"])
        }
        logger.notice("state loaded", metadata: [
            "sessions": "\(self.sessions.count)", "snapshot_records": "\(report.snapshotRecords)",
            "journal_records": "\(report.journalRecords)", "journals": "\(report.journals)",
            "seconds": "\((ContinuousClock.now - started).seconds)",
        ])
    }

    // MARK: StateStore

    func readSession<T: Sendable>(_ id: SHA256Digest, now: Double, _ body: (borrowing Session) -> T) -> T? {
        sessions.read(id, now: now, body)
    }

    @discardableResult
    func saveSession(_ session: Session, createdBy code: SHA256Digest?) async throws(StateWriteError) -> Bool {
        let saved = sessions.put(session)
        let bound = code.map { flows.bind($0, to: session.id) }
        try await saved.wait()
        try await bound?.ticket.wait()
        return !(bound?.replayed ?? false)
    }

    func updateSession(_ id: SHA256Digest, _ change: (inout Session) -> Void) async throws(StateWriteError) -> Session? {
        let (session, ticket) = sessions.update(id, change)
        try await ticket.wait()
        return session
    }

    func removeSession(_ id: SHA256Digest) async throws(StateWriteError) -> Session? {
        let (session, ticket) = sessions.remove(id)
        try await ticket.wait()
        return session
    }

    func beginLogin(_ state: SHA256Digest, _ pending: PendingAuthorization) {
        flows.addPending(state, pending)
    }

    func takeLogin(_ state: SHA256Digest, now: Double) -> PendingAuthorization? {
        flows.takePending(state, now: now)
    }

    func issueHandoff(_ code: SHA256Digest, _ handoff: Handoff) async throws(StateWriteError) {
        try await flows.addHandoff(code, handoff).wait()
    }

    func redeemHandoff(_ code: SHA256Digest, now: Double) async throws(StateWriteError) -> FlowStore.Redemption {
        let (redemption, ticket) = flows.redeem(code, now: now)
        try await ticket.wait()
        return redemption
    }

    // MARK: Upkeep

    /// Drops expired sessions, logins and codes.
    func sweep(now: Double) {
        let removed = sessions.sweep(now: now)
        flows.sweep(now: now)
        if removed > 0 { logger.info("expired sessions removed", metadata: ["count": "\(removed)"]) }
    }

    /// Why the state cannot be written, for `/readyz`: the last journal write or snapshot failed
    /// (a full disk, a read-only or vanished directory), until one succeeds again. Nil in memory.
    var writeFailure: String? {
        disk?.journal.failure ?? snapshotFailure.withLock { $0 }
    }

    /// Whether the journal has outgrown `limit` bytes.
    func journalExceeds(_ limit: Int) -> Bool {
        (disk?.journal.size ?? 0) > limit
    }

    /// Writes a snapshot of everything and retires the journals it covers. Request handling goes
    /// on meanwhile: the journal rotates first, then each shard is copied (copy-on-write), then
    /// the file is written on a thread of its own.
    func snapshot() async throws(StateWriteError) {
        guard let disk, snapshotting.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else { return }
        defer { snapshotting.store(false, ordering: .releasing) }
        do throws(StateWriteError) {
            try await writeSnapshot(disk)
            snapshotFailure.withLock { $0 = nil }
        } catch {
            snapshotFailure.withLock { $0 = error.description }
            throw error
        }
    }

    private func writeSnapshot(_ disk: Disk) async throws(StateWriteError) {
        let started = ContinuousClock.now
        let generation = try await disk.journal.rotate()
        let shards = sessions.capture()
        let flows = flows.capture()
        let written: Result<(records: Int, bytes: Int), StateWriteError> = await Self.onOwnThread {
            do throws(StateWriteError) {
                return .success(try SnapshotWriter.write(directory: disk.directory, generation: generation, keys: disk.keys) { emit in
                    for shard in shards { for session in shard.values { emit(.session(session)) } }
                    for (state, pending) in flows.pending { emit(.pending(state, pending)) }
                    for (code, handoff) in flows.handoffs { emit(.handoff(code, handoff)) }
                })
            } catch {
                return .failure(error)
            }
        }
        let (records, bytes) = try written.get()
        Self.retireJournals(before: generation, in: disk.directory)
        metrics?.snapshotWritten(seconds: (ContinuousClock.now - started).seconds, bytes: bytes)
        logger.info("snapshot written", metadata: [
            "records": "\(records)", "bytes": "\(bytes)", "generation": "\(generation)",
            "seconds": "\((ContinuousClock.now - started).seconds)",
        ])
    }

    /// A final snapshot, then the journal's writer stops.
    func close() async {
        do {
            try await snapshot()
        } catch {
            logger.error("the final snapshot failed; the journal keeps every change", metadata: ["reason": "\(error.description)"])
        }
        await disk?.journal.stop()
    }

    private static func retireJournals(before generation: UInt64, in directory: String) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names {
            if let number = Journal.generation(ofFileNamed: name), number < generation {
                try? FileManager.default.removeItem(atPath: "\(directory)/\(name)")
            }
        }
        try? StateFileIO.syncDirectory(directory)
    }

    /// Runs blocking file work on a thread of its own, off the concurrency pool.
    private static func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: work()) }
        }
    }
}

/// Why the state could not be opened at start.
public struct StateOpenError: Error, Sendable, CustomStringConvertible {
    public let description: String
}
