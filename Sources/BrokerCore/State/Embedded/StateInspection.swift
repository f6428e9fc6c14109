import Foundation

/// `token-broker state inspect`: reads every state file without changing anything and
/// describes it — counts, sizes, generations, times, key ids; never a token or secret — and
/// gives the verdict a start would: it fails where a start would stop (``StateRecovery``), and
/// for a directory that is not there (a start would make it, and begin empty).
public enum StateInspection {
    public static func describe(_ settings: StateSettings) throws(StateInspectionError) -> String {
        guard let keys = settings.keys else {
            throw StateInspectionError(description: "no state key is configured (\(settings.keySource)); the files cannot be read")
        }
        let directory = settings.directory
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw StateInspectionError(description: "the state directory \(directory) does not exist, or is not a directory")
        }
        guard let listed = try? FileManager.default.contentsOfDirectory(atPath: directory) else {
            throw StateInspectionError(description: "the state directory \(directory) cannot be listed")
        }
        let names = listed.sorted()
        let covered = snapshotGeneration(directory)
        let newestJournal = names.compactMap { name in Journal.generation(ofFileNamed: name).map { (generation: $0, name: name) } }
            .max { $0.generation < $1.generation }?.name
        var lines = ["state directory: \(directory)", "keys: \(keys.ids.count) configured, current \(StateKeys.hex(id: keys.currentID))"]
        var sessions = 0
        var removals = 0
        var pending = 0
        var handoffs = 0
        var devices = 0
        var revocations = 0
        func count(_ record: StateRecord) {
            switch record {
            case .session: sessions += 1
            case .sessionRemoved: removals += 1
            case .pending: pending += 1
            case .pendingRemoved, .spent, .revocationRemoved, .signOut: break
            case .handoff: handoffs += 1
            case .device: devices += 1
            case .revocation: revocations += 1
            }
        }
        var damaged = false
        for name in names where name == SnapshotWriter.fileName || Journal.generation(ofFileNamed: name) != nil {
            let path = "\(directory)/\(name)"
            let size = ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0
            let kind: StateFileHeader.Kind = name == SnapshotWriter.fileName ? .snapshot : .journal
            if kind == .journal, StateRecovery.interruptedCreation(size: size, newest: name == newestJournal) {
                lines.append("\(name): \(size) bytes, cut short while it was created (nothing in it was acknowledged; removed at the next start)")
                continue
            }
            if kind == .journal, let generation = Journal.generation(ofFileNamed: name), generation < covered {
                // A start deletes it unread: its key may already be gone.
                lines.append("\(name): \(size) bytes, covered by the snapshot (deleted at the next start)")
                continue
            }
            do {
                let scan = try StateFileReader.read(path, kind: kind, keys: keys, apply: count)
                let created = Timestamp.format(seconds: Int(scan.header.createdAt))
                var line = "\(name): \(size) bytes, generation \(scan.header.generation), created \(created), key \(StateKeys.hex(id: scan.header.keyID)), \(scan.frames) frames, \(scan.records) records"
                if let torn = scan.tornTail { line += "; torn last record at offset \(torn.offset) (\(torn.size) bytes, dropped at the next start)" }
                lines.append(line)
            } catch {
                damaged = true
                let verdict = switch error.kind {
                case .damage: "DAMAGED"
                case .unknownKey: "NO KEY"
                case .unreadable: "UNREADABLE"
                }
                lines.append("\(name): \(size) bytes, \(verdict): \(error.description)")
            }
        }
        // What no single file shows: a snapshot or a journal missing before one that is there.
        do throws(StateLoadError) {
            try StateRecovery.read(directory: directory, keys: keys) { _ in }
        } catch {
            damaged = true
            lines.append("a start stops at: \(error.description)")
        }
        if names.contains(where: { $0.contains(".damaged-") }) {
            lines.append("files set aside as damaged: " + names.filter { $0.contains(".damaged-") }.joined(separator: ", "))
        }
        lines.append("records: \(sessions) session writes, \(removals) session removals, \(pending) logins in progress, \(handoffs) handoff code writes, \(devices) device code writes, \(revocations) revocation writes")
        if damaged { throw StateInspectionError(description: lines.joined(separator: "\n")) }
        return lines.joined(separator: "\n")
    }
}

extension StateInspection {
    /// The generation the snapshot in `directory` covers, from its header (in the clear); 0
    /// without a readable one, when every journal is read.
    private static func snapshotGeneration(_ directory: String) -> UInt64 {
        guard let file = try? PositionalFile(SnapshotWriter.path(directory)), let bytes = try? file.read(at: 0, count: StateFileHeader.size),
              let header = try? StateFileHeader.parse(bytes, expected: .snapshot) else { return 0 }
        return header.generation
    }
}

public struct StateInspectionError: Error, Sendable, CustomStringConvertible {
    public let description: String
}
