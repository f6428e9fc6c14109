import BrokerCrypto
import Foundation

/// Writes a snapshot of the whole state atomically: a temporary file, fsync, rename over the
/// previous snapshot, fsync of the directory. A crash at any point leaves either the old or the
/// new snapshot, complete.
enum SnapshotWriter {
    static let fileName = "snapshot.tbs"

    static func path(_ directory: String) -> String { "\(directory)/\(fileName)" }

    /// Plaintext per frame.
    private static let frameBytes = 256 << 10

    /// Writes `records` (produced by `contents`, which hands each record to its argument) as the
    /// snapshot that covers every journal before `generation`. Returns the records and bytes written.
    static func write(
        directory: String, generation: UInt64, keys: StateKeys,
        contents: ((StateRecord) -> Void) -> Void
    ) throws(StateWriteError) -> (records: Int, bytes: Int) {
        let final = path(directory)
        let temporary = final + ".tmp"
        let header = StateFileHeader(kind: .snapshot, keyID: keys.currentID, generation: generation, createdAt: UInt64(Date().timeIntervalSince1970)).bytes
        do {
            let descriptor = try StateFileIO.openForWriting(temporary, truncate: true)
            defer { close(descriptor) }
            var out = header
            var plaintext: [UInt8] = []
            plaintext.reserveCapacity(frameBytes + 4096)
            var frames: UInt64 = 0
            var records = 0
            var written = 0
            var failure: (any Error)?
            func flushFrame() {
                guard failure == nil, !plaintext.isEmpty else { return }
                do {
                    out += try FrameLayout.seal(plaintext, type: .records, index: frames, header: header, key: keys.current)
                    frames += 1
                    plaintext.removeAll(keepingCapacity: true)
                    if out.count >= 4 << 20 {
                        try StateFileIO.writeAll(descriptor, out, path: temporary)
                        written += out.count
                        out.removeAll(keepingCapacity: true)
                    }
                } catch {
                    failure = error
                }
            }
            contents { record in
                record.encode(into: &plaintext)
                records += 1
                if plaintext.count >= frameBytes { flushFrame() }
            }
            flushFrame()
            if let failure { throw StateWriteError(description: "the snapshot could not be written: \(failure)") }
            var count: [UInt8] = []
            BigEndian.append(UInt64(records), to: &count, width: 8)
            out += try FrameLayout.seal(count, type: .end, index: frames, header: header, key: keys.current)
            try StateFileIO.writeAll(descriptor, out, path: temporary)
            written += out.count
            try StateFileIO.sync(descriptor, path: temporary)
            try StateFileIO.rename(temporary, final)
            try StateFileIO.syncDirectory(directory)
            return (records, written)
        } catch let error as StateWriteError {
            throw error
        } catch {
            throw StateWriteError(description: "the snapshot could not be written: \(error)")
        }
    }
}
