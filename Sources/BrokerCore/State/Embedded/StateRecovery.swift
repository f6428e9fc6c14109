import Foundation

/// Loads the state at start: the snapshot, then every journal it does not cover, in order.
///
/// A journal's torn last frame (a crash in the middle of a write, before anything was
/// acknowledged) is cut off and reported. Any other damage, a missing file (the snapshot that
/// the journals follow, or a journal between two others), a missing key or an unknown format
/// stops the start with a `StateLoadError` naming the file and offset — unless the operator
/// accepts damage (`--accept-damaged-state`), in which case the damaged file is kept aside as
/// `<name>.damaged-<time>`, what could be read before the damage is used, and the start goes on.
///
/// `state import` reads a directory with ``read(directory:keys:apply:)``: the same order and
/// checks, and not a byte of the directory changed (a torn tail is read up to the tear, damage
/// stops it).
enum StateRecovery {
    struct Report: Sendable {
        var snapshotRecords = 0
        var journalRecords = 0
        var journals = 0
        /// Torn journal tails that were dropped: file, offset, size.
        var tornTails: [(path: String, offset: Int, size: Int)] = []
        /// Damage accepted by the operator.
        var damaged: [StateLoadError] = []
        /// The generation the next journal takes.
        var nextGeneration: UInt64 = 1
    }

    static func load(directory: String, keys: StateKeys, acceptDamage: Bool, apply: (StateRecord) -> Void) throws(StateLoadError) -> Report {
        try? FileManager.default.removeItem(atPath: SnapshotWriter.path(directory) + ".tmp")
        return try scan(directory: directory, keys: keys, acceptDamage: acceptDamage, repair: true, apply: apply)
    }

    /// Reads the state in `directory` as a start would, changing nothing in it.
    static func read(directory: String, keys: StateKeys, apply: (StateRecord) -> Void) throws(StateLoadError) {
        _ = try scan(directory: directory, keys: keys, acceptDamage: false, repair: false, apply: apply)
    }

    /// Whether `directory` holds a snapshot or a journal.
    static func holdsState(_ directory: String) -> Bool {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.contains { $0 == SnapshotWriter.fileName || Journal.generation(ofFileNamed: $0) != nil }
    }

    /// With `repair`, what a crash left behind is tidied as it is read: journals a snapshot
    /// covers are deleted, a torn tail cut off, an empty newest journal removed.
    private static func scan(
        directory: String, keys: StateKeys, acceptDamage: Bool, repair: Bool, apply: (StateRecord) -> Void
    ) throws(StateLoadError) -> Report {
        var report = Report()
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        let journals = names.compactMap { name -> (UInt64, String)? in
            guard let generation = Journal.generation(ofFileNamed: name) else { return nil }
            return (generation, "\(directory)/\(name)")
        }.sorted { $0.0 < $1.0 }

        var covered: UInt64 = 0
        let snapshot = SnapshotWriter.path(directory)
        let hasSnapshot = FileManager.default.fileExists(atPath: snapshot)
        // The journals a start reads run without a gap from the snapshot's generation (1 with no
        // snapshot: the first journal), because a journal is retired only by a snapshot that
        // covers it. Past a damaged snapshot, whose generation is unknown, from the first journal.
        var expected: UInt64? = hasSnapshot ? nil : 1
        if hasSnapshot {
            do {
                let scan = try StateFileReader.read(snapshot, kind: .snapshot, keys: keys, apply: apply)
                report.snapshotRecords = scan.records
                covered = scan.header.generation
                expected = covered
            } catch {
                guard acceptDamage, error.isDamage else { throw error }
                report.damaged.append(error)
                if repair { setAside(snapshot) }
            }
        }
        var lastKept: UInt64 = 0
        for (index, (generation, path)) in journals.enumerated() {
            guard generation >= covered else {
                // Covered by the snapshot; its deletion did not happen before a restart.
                if repair { try? FileManager.default.removeItem(atPath: path) }
                continue
            }
            if let expected, generation > expected {
                // With no snapshot, a first journal after generation 1 follows a snapshot that is gone.
                let gone = hasSnapshot ? Journal.path(directory, generation: expected) : snapshot
                let missing = StateLoadError(path: gone, offset: 0, reason: "the file is missing, but \(path) follows it: what it held would be lost")
                guard acceptDamage else { throw missing }
                report.damaged.append(missing)
            }
            expected = generation + 1
            let size = ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0
            if interruptedCreation(size: size, newest: index == journals.count - 1) {
                // Its generation is taken again.
                report.tornTails.append((path, 0, size))
                if repair { try? FileManager.default.removeItem(atPath: path) }
                continue
            }
            lastKept = generation
            do {
                let scan = try StateFileReader.read(path, kind: .journal, keys: keys, apply: apply)
                report.journals += 1
                report.journalRecords += scan.records
                if let torn = scan.tornTail {
                    report.tornTails.append((path, torn.offset, torn.size))
                    if repair { try? StateFileIO.truncate(path, to: torn.offset) }
                }
            } catch {
                guard acceptDamage, error.isDamage else { throw error }
                report.damaged.append(error)
                if repair { setAside(path) }
            }
        }
        report.nextGeneration = max(covered, lastKept + 1)
        return report
    }

    /// A newest journal shorter than its header: a crash while it was being created, before
    /// anything in it was acknowledged. A start removes it; it is not damage.
    static func interruptedCreation(size: Int, newest: Bool) -> Bool {
        newest && size < StateFileHeader.size
    }

    private static func setAside(_ path: String) {
        try? StateFileIO.rename(path, "\(path).damaged-\(Int(Date().timeIntervalSince1970))")
    }
}
