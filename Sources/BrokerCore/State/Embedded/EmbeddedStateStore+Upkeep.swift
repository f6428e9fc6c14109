import Foundation
import Logging
import Synchronization

/// EmbeddedStateStore's upkeep: sweeping expired entries, snapshots that retire journals, closing.
extension EmbeddedStateStore {
    /// Ends what expired at the clock's now — sessions past their lifetimes, handoff codes never
    /// redeemed, device codes never collected — their revocations queued and logged with their
    /// removal, and forgets expired logins, tokens and sign-outs, and codes past the replay memory.
    @discardableResult func sweep() async -> [EndedGrant] {
        let now = clock()
        var ended: [EndedGrant] = []
        var tickets: [DurabilityTicket] = []
        // Found outside the flow table's lock (reads of sessions go on meanwhile), ended a batch at
        // a time under it, each with its revocation in one change.
        let expired = sessions.expired(now: now)
        for start in stride(from: 0, to: expired.count, by: 500) {
            flows.change { entries in
                for id in expired[start..<min(start + 500, expired.count)] {
                    let (_, ticket) = sessions.remove(id, if: { !sessions.isLive($0, now: now) }) { removed in
                        guard let removed else { return [] }
                        let (end, queued) = EndedGrant.of(removed, reason: .expired, at: now)
                        entries.revocations[queued.id] = queued
                        ended.append(end)
                        return [.revocation(queued)]
                    }
                    tickets.append(ticket)
                }
            }
        }
        let (codesEnded, codeTickets) = flows.change { entries -> ([EndedGrant], [DurabilityTicket]) in
            var effects: [GrantEffect] = []
            var records: [StateRecord] = []
            for (code, var handoff) in entries.handoffs {
                let expiring = handoff.expire(at: now)
                guard !expiring.isEmpty else { continue }
                entries.handoffs[code] = handoff
                records.append(.handoff(code, handoff))
                effects += expiring
            }
            for (code, var device) in entries.devices {
                let expiring = device.expire(at: now)
                guard !expiring.isEmpty else { continue }
                entries.put(code, device)
                records.append(.device(code, device))
                effects += expiring
            }
            let (transition, tickets) = apply(effects, to: &entries, answer: (), logging: records, now: now)
            entries.forgetExpired(now: now, replayMemory: Self.replayMemory)
            return (transition.ended, tickets)
        }
        ended += codesEnded
        for ticket in tickets + codeTickets {
            do {
                try await ticket.wait()
            } catch {
                logger.error("what the sweep ended could not be logged; the next snapshot keeps it", metadata: ["reason": "\(error.description)"])
                break
            }
        }
        let sessionsEnded = ended.filter { if case .session = $0.holder { true } else { false } }.count
        if sessionsEnded > 0 { logger.info("expired sessions ended", metadata: ["count": .stringConvertible(sessionsEnded)]) }
        return ended
    }

    /// Sweeps every 30 s, and writes a snapshot every snapshot interval or as soon as the journal
    /// outgrows its limit, until the task is cancelled. After a start past accepted damage, the
    /// first snapshot comes at once: it becomes the new base, so that the next start does not
    /// meet the same damage (a file set aside, a gap) again.
    func maintain(ended: @escaping @Sendable ([EndedGrant]) async -> Void) async {
        let interval = Duration.seconds(disk?.settings.snapshotIntervalSeconds ?? 0)
        var lastSnapshot = ContinuousClock.now - (startedPastDamage ? interval : .zero)
        var lastSweep = ContinuousClock.now
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(1))
            let now = ContinuousClock.now
            if now - lastSweep >= .seconds(30) {
                await ended(await sweep())
                lastSweep = now
            }
            guard let disk else { continue }
            if now - lastSnapshot >= interval || disk.journal.size > disk.settings.journalMaxBytes {
                // A failure is logged as it begins and ends (``snapshotOutage``); the journal keeps
                // every change meanwhile.
                try? await snapshot()
                lastSnapshot = ContinuousClock.now
            }
        }
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

    /// Writes a snapshot of everything and retires the journals it covers. Request handling goes
    /// on meanwhile: the journal rotates first, then each shard is copied (copy-on-write), then
    /// the file is written on a thread of its own.
    func snapshot() async throws(StateWriteError) {
        guard let disk, snapshotting.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else { return }
        defer { snapshotting.store(false, ordering: .releasing) }
        do throws(StateWriteError) {
            try await writeSnapshot(disk)
            snapshotOutage.succeeded()
        } catch {
            snapshotOutage.failed(error.description + "; the journal keeps every change")
            throw error
        }
    }

    private func writeSnapshot(_ disk: Disk) async throws(StateWriteError) {
        let started = ContinuousClock.now
        let generation = try await disk.journal.rotate()
        let shards = sessions.capture()
        let tables = flows.capture()
        let written: Result<(records: Int, bytes: Int), StateWriteError> = await Self.onOwnThread {
            do throws(StateWriteError) {
                // A part per shard, and the flow tables' records last.
                return .success(try SnapshotWriter.write(directory: disk.directory, generation: generation, keys: disk.keys,
                                                         parts: shards.count + 1) { part, emit in
                    guard part < shards.count else { return tables.records().forEach(emit) }
                    for stored in shards[part].values { emit(.session(stored.session)) }
                })
            } catch {
                return .failure(error)
            }
        }
        let (records, bytes) = try written.get()
        Self.retireJournals(before: generation, in: disk.directory)
        metrics?.snapshotWritten(seconds: (ContinuousClock.now - started).seconds, bytes: bytes)
        logger.info("snapshot written", metadata: [
            "records": .stringConvertible(records), "bytes": .stringConvertible(bytes), "generation": .stringConvertible(generation),
            "seconds": .stringConvertible((ContinuousClock.now - started).seconds),
        ])
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

    /// Runs blocking file work on a thread of its own, off the concurrency pool; on the
    /// caller's when the system refuses a thread (``OrderedWork/startThread(_:)``).
    private static func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            let body: @Sendable () -> Void = { continuation.resume(returning: work()) }
            if !OrderedWork.startThread(body) { body() }
        }
    }
}
