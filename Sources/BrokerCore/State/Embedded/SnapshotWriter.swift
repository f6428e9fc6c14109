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

    /// Writes the records of `parts` parts (`contents` hands those of one part to its
    /// argument) as the snapshot that covers every journal before `generation`. Returns the
    /// records and bytes written.
    ///
    /// The parts are encoded on every core (``OrderedWork``), each into frames of its own; this
    /// thread seals the frames in order, as their index is in what they authenticate, and writes
    /// them.
    static func write(
        directory: String, generation: UInt64, keys: StateKeys, parts: Int,
        contents: @escaping @Sendable (_ part: Int, _ emit: (StateRecord) -> Void) -> Void
    ) throws(StateWriteError) -> (records: Int, bytes: Int) {
        let final = path(directory)
        let temporary = final + ".tmp"
        let header = StateFileHeader(kind: .snapshot, keyID: keys.currentID, generation: generation, createdAt: UInt64(Date().timeIntervalSince1970)).bytes
        do {
            let descriptor = try StateFileIO.openForWriting(temporary, truncate: true)
            defer { close(descriptor) }
            var out = header
            var frames: UInt64 = 0
            var records = 0
            var written = 0
            func append(_ plaintext: [UInt8], type: FrameType) throws {
                out += try FrameLayout.seal(plaintext, type: type, index: frames, header: header, key: keys.current)
                frames += 1
                if out.count >= 4 << 20 {
                    try StateFileIO.writeAll(descriptor, out, path: temporary)
                    written += out.count
                    out.removeAll(keepingCapacity: true)
                }
            }
            // Each part is a whole shard's plaintext: two threads (both cores of the machines this
            // is measured on) keep at most 2 × OrderedWork.window of them in memory, whatever the cores.
            try OrderedWork.run(items: parts, threads: min(2, OrderedWork.defaultThreads),
                                makeWorker: { { part in encode(part, contents) } }) { (part: EncodedPart) throws in
                for plaintext in part.frames { try append(plaintext, type: .records) }
                records += part.records
            }
            var count: [UInt8] = []
            BigEndian.append(UInt64(records), to: &count, width: 8)
            try append(count, type: .end)
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

    /// A part's records, encoded as the plaintext of its frames.
    private struct EncodedPart: Sendable {
        var frames: [[UInt8]] = []
        var records = 0
    }

    private static func encode(_ part: Int, _ contents: (Int, (StateRecord) -> Void) -> Void) -> EncodedPart {
        var encoded = EncodedPart()
        var plaintext: [UInt8] = []
        plaintext.reserveCapacity(frameBytes + 4096)
        contents(part) { record in
            record.encode(into: &plaintext)
            encoded.records += 1
            if plaintext.count >= frameBytes {
                encoded.frames.append(plaintext)
                plaintext.removeAll(keepingCapacity: true)
            }
        }
        if !plaintext.isEmpty { encoded.frames.append(plaintext) }
        return encoded
    }
}
