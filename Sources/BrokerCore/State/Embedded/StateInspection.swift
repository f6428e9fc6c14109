import Foundation

/// `token-broker state inspect`: reads every state file without changing anything and
/// describes it — counts, sizes, generations, times, key ids; never a token or secret.
public enum StateInspection {
    public static func describe(_ settings: StateSettings) throws(StateInspectionError) -> String {
        guard let keys = settings.keys else {
            throw StateInspectionError(description: "no state key is configured (\(settings.keySource)); the files cannot be read")
        }
        let directory = settings.directory
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
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
            do {
                let scan = try StateFileReader.read(path, kind: kind, keys: keys, apply: count)
                let created = Timestamp.format(seconds: Int(scan.header.createdAt))
                var line = "\(name): \(size) bytes, generation \(scan.header.generation), created \(created), key \(StateKeys.hex(id: scan.header.keyID)), \(scan.frames) frames, \(scan.records) records"
                if let torn = scan.tornTail { line += "; torn last record at offset \(torn.offset) (\(torn.size) bytes, dropped at the next start)" }
                lines.append(line)
            } catch {
                damaged = true
                lines.append("\(name): \(size) bytes, DAMAGED: \(error.description)")
            }
        }
        if names.contains(where: { $0.contains(".damaged-") }) {
            lines.append("files set aside as damaged: " + names.filter { $0.contains(".damaged-") }.joined(separator: ", "))
        }
        lines.append("records: \(sessions) session writes, \(removals) session removals, \(pending) logins in progress, \(handoffs) handoff code writes, \(devices) device code writes, \(revocations) revocation writes")
        if damaged { throw StateInspectionError(description: lines.joined(separator: "\n")) }
        return lines.joined(separator: "\n")
    }
}

public struct StateInspectionError: Error, Sendable, CustomStringConvertible {
    public let description: String
}
