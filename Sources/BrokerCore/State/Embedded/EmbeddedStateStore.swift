import BrokerCrypto
import Foundation
import Logging
import Synchronization

/// The state on one machine: in memory (sharded sessions, logins, handoff codes), made durable
/// by an encrypted journal plus periodic snapshots in the state directory (docs/state.md).
/// Upkeep (sweeping, snapshots) is in EmbeddedStateStore+Upkeep.swift.
final class EmbeddedStateStore: StateStore {
    let sessions: SessionTable
    let flows: FlowTable
    /// Where every change is logged: the journal (or nothing, in memory only).
    let log: any ChangeLog
    let disk: Disk?
    let clock: BrokerClock
    let logger: Logger
    let metrics: BrokerMetrics?
    let snapshotting = Atomic<Bool>(false)
    /// The snapshots' failures, logged once as they begin and end.
    let snapshotOutage: OutageWatch
    /// The start set damage aside (`--accept-damaged-state`): what was read is not yet a base.
    let startedPastDamage: Bool

    /// Where and how the state is kept on disk.
    struct Disk: Sendable {
        let settings: StateSettings
        let keys: StateKeys
        let journal: Journal
        var directory: String { settings.directory }
    }

    /// Memory only (development mode without a state key).
    init(lifetimes: SessionLifetimes, clock: @escaping BrokerClock, logger: Logger) {
        log = NoChangeLog()
        sessions = SessionTable(log: log, lifetimes: lifetimes)
        flows = FlowTable()
        disk = nil
        self.clock = clock
        self.logger = logger
        metrics = nil
        startedPastDamage = false
        snapshotOutage = OutageWatch("the state directory's snapshot", logger: logger)
    }

    /// Locks `settings.directory` for this process, loads the state from it (snapshot, then
    /// journals) and starts a new journal. `faults` are a test's.
    init(
        settings: StateSettings, keys: StateKeys, lifetimes: SessionLifetimes, acceptDamage: Bool,
        clock: @escaping BrokerClock, logger: Logger, metrics: BrokerMetrics? = nil, faults: StateFileFaults? = nil
    ) throws(StateOpenError) {
        let directory = settings.directory
        do {
            try StateFileIO.createDirectory(directory)
            try StateDirectoryLock.acquire(directory)
        } catch {
            throw StateOpenError(description: error.description)
        }
        let started = ContinuousClock.now
        // Recovered records are applied without logging; the journal takes over afterwards.
        let log = SwitchableLog()
        let sessions = SessionTable(log: log, lifetimes: lifetimes)
        let flows = FlowTable()
        let report: StateRecovery.Report
        do {
            report = try StateRecovery.load(directory: directory, keys: keys, acceptDamage: acceptDamage) { record in
                switch record {
                case .session(let session): sessions.restore(session)
                case .sessionRemoved(let id): sessions.restoreRemoval(id)
                default: flows.change { $0.restore(record) }
                }
            }
        } catch {
            let advice = switch error.kind {
            case .damage: "To start anyway with what can be read, run with --accept-damaged-state (the damaged file is kept aside)."
            case .unknownKey: "Configure the key the file was written with (state keys: the current key first, older keys after it)."
            case .unreadable: "Let the broker's user read the file (its owner and mode), or mend what keeps it from being read; "
                + "a file that cannot be opened is not damage, and is never set aside."
            }
            // Damage, or a key not configured, waits for an operator: no retry of the same start
            // mends it. A file the system would not open may (a volume still mounting).
            throw StateOpenError(description: "\(error.description)\nThe broker did not start. \(advice)", permanent: error.kind != .unreadable)
        }
        let journal: Journal
        do {
            journal = try Journal(directory: directory, generation: report.nextGeneration, keys: keys,
                                  outage: OutageWatch("the state directory's journal", logger: logger) {
                                      metrics?.stateWriteFailed(file: "journal")
                                  }, faults: faults) { seconds in
                metrics?.journalCommitted(seconds: seconds)
            }
        } catch {
            throw StateOpenError(description: error.description)
        }
        log.switchTo(journal)
        self.log = log
        self.sessions = sessions
        self.flows = flows
        disk = Disk(settings: settings, keys: keys, journal: journal)
        self.clock = clock
        self.logger = logger
        snapshotOutage = OutageWatch("the state directory's snapshot", logger: logger) {
            metrics?.stateWriteFailed(file: "snapshot")
        }
        metrics?.stateDirectoryOpened()
        self.metrics = metrics
        startedPastDamage = !report.damaged.isEmpty
        for torn in report.tornTails {
            logger.warning("dropped a torn journal record (a crash during its write, never acknowledged)", metadata: [
                "file": "\(torn.path)", "offset": .stringConvertible(torn.offset), "size": .stringConvertible(torn.size),
            ])
        }
        for damage in report.damaged {
            logger.error("damaged state file set aside; started with what could be read", metadata: ["problem": "\(damage.description)"])
        }
        logger.notice("state loaded", metadata: [
            "sessions": .stringConvertible(self.sessions.count), "snapshot_records": .stringConvertible(report.snapshotRecords),
            "journal_records": .stringConvertible(report.journalRecords), "journals": .stringConvertible(report.journals),
            "seconds": .stringConvertible((ContinuousClock.now - started).seconds),
        ])
    }

    // MARK: StateStore

    func readSession<T: Sendable>(_ id: SHA256Digest, now: Double, _ body: (borrowing Session) -> T) -> T? {
        sessions.read(id, now: now, body)
    }

    func noteUse(_ id: SHA256Digest, now: Double) {
        sessions.noteUse(id, now: now)
    }

    /// Memory is the whole state: a session not in it does not exist.
    var holdsEverySession: Bool { true }

    func loadSession(_ id: SHA256Digest, now: Double) async throws(StateReadError) -> Session? {
        session(id, now: now)
    }

    /// One broker per state directory (the directory lock): the refresher's single-flight is the
    /// only lease there is to take.
    func whileRefreshing<T: Sendable>(_ id: SHA256Digest, _ refresh: (RefreshLease) async -> T) async throws(StateWriteError) -> T {
        await refresh(RefreshLease(session: id, held: nil))
    }

    func updateSession(_ id: SHA256Digest, under lease: RefreshLease?, _ change: (inout Session) -> Void) async throws(StateWriteError) -> Session? {
        let (session, ticket) = sessions.update(id, change)
        try await ticket.wait()
        return session
    }

    func endSession(_ id: SHA256Digest, _ reason: EndReason, now: Double) async throws(StateWriteError) -> EndedGrant? {
        let (ended, ticket) = flows.change { entries in
            var ended: EndedGrant?
            let (_, ticket) = sessions.remove(id) { removed in
                guard let removed else { return [] }
                let (end, queued) = EndedGrant.of(removed, reason: reason, at: now)
                entries.revocations[queued.id] = queued
                ended = end
                return [.revocation(queued)]
            }
            return (ended, ticket)
        }
        try await ticket.wait()
        return ended
    }

    func importSessions(_ imported: [Session]) async throws(StateWriteError) -> Int {
        let now = clock()
        let tickets = imported.compactMap { copied in session(copied.id, now: now) == nil ? sessions.put(copied) : nil }
        for ticket in tickets { try await ticket.wait() }
        return tickets.count
    }

    /// Memory holds every session: a scan of copies (each shard's costs nothing until it next
    /// changes), in id order. Admin calls and logout tokens are rare next to reads.
    func findSessions(_ filter: SessionFilter, after: SHA256Digest?, limit: Int, now: Double) async throws(StateReadError) -> SessionPage {
        var matching: [Session] = []
        for shard in sessions.capture() {
            for session in shard.values.lazy.map(\.session) where sessions.isLive(session, now: now) && filter.matches(session) {
                if let after, !(after.hex < session.id.hex) { continue }
                matching.append(session)
            }
        }
        matching.sort { $0.id.hex < $1.id.hex }
        let page = Array(matching.prefix(limit))
        return SessionPage(sessions: page, next: matching.count > limit ? page.last?.id : nil)
    }

    var sessionCount: Int { sessions.count }

    /// Why the state cannot be written, for `/readyz`: the last journal write or snapshot failed
    /// (a full disk, a read-only or vanished directory), until one succeeds again. Nil in memory.
    var writeFailure: String? {
        disk?.journal.failure ?? snapshotOutage.reason
    }
}

/// Why the state could not be opened at start.
public struct StateOpenError: Error, Sendable, CustomStringConvertible {
    public let description: String
    /// No retry can open it (a database schema newer than this broker, a damaged file, a key not
    /// configured).
    public var permanent = false
}
