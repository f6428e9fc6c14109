import BrokerCrypto

/// A damaged or unreadable state file: which file, where, and why. Never silently dropped.
public struct StateLoadError: Error, Sendable, CustomStringConvertible {
    public let path: String
    public let offset: Int
    public let reason: String
    public var kind = Kind.damage

    /// What the error tells of the file, and so what a start may do about it.
    public enum Kind: Sendable {
        /// Its bytes are not what the broker wrote: `--accept-damaged-state` sets it aside.
        case damage
        /// It is intact, but no configured key opens it: setting it aside would only hide
        /// sessions a correct key can read.
        case unknownKey
        /// The system would not open it (permissions, an I/O error): nothing is known of its
        /// bytes, so it is never taken for damage, nor set aside.
        case unreadable
    }

    public var isDamage: Bool { kind == .damage }

    public var description: String { "\(path) at offset \(offset): \(reason)" }
}

/// What reading one state file found.
struct StateFileScan: Sendable {
    let header: StateFileHeader
    var frames = 0
    var records = 0
    /// A journal's last frame, cut short by the end of the file: a crash interrupted its write,
    /// before the sync that precedes any acknowledgement. Dropped.
    var tornTail: (offset: Int, size: Int)?
}

extension StateFileHeader: @unchecked Sendable {}

/// Reads a state file in two passes. The calling thread first walks the chain of frame prefixes
/// (lengths and types, in the clear), which finds where each frame lies and where the file stops
/// being whole; then the frames are decrypted and decoded on every core (``OrderedWork``) and
/// the calling thread applies their records in the file's order. What is applied, and the error
/// thrown, are those of a reading front to back: damage in a frame stops the reading after the
/// records before it, wherever the walk found more damage later on.
enum StateFileReader {
    /// Reads `path`, handing every record to `apply` in order; the frames are decoded on
    /// `threads` threads (one: on the calling thread alone).
    static func read(_ path: String, kind: StateFileHeader.Kind, keys: StateKeys, threads: Int = OrderedWork.defaultThreads,
                     apply: (StateRecord) -> Void) throws(StateLoadError) -> StateFileScan {
        let file: PositionalFile
        let headerBytes: [UInt8]
        do {
            file = try PositionalFile(path)
            headerBytes = try file.read(at: 0, count: StateFileHeader.size)
        } catch {
            throw StateLoadError(path: path, offset: 0, reason: error.description, kind: .unreadable)
        }
        let header: StateFileHeader
        do throws(StateFileProblem) {
            header = try StateFileHeader.parse(headerBytes, expected: kind)
        } catch {
            throw StateLoadError(path: path, offset: error.offset, reason: error.reason)
        }
        guard let key = keys.key(id: header.keyID) else {
            throw StateLoadError(path: path, offset: 8, reason: "the file is encrypted with key \(StateKeys.hex(id: header.keyID)), which is not among the configured state keys",
                                 kind: .unknownKey)
        }
        let walk = FrameWalk(file, kind: kind, version: header.version)
        let frames = FrameDecoder(file: file, header: headerBytes, key: key, walk: walk)
        var scan = StateFileScan(header: header)
        var sawEnd = false
        try OrderedWork.run(items: walk.batches.count, threads: threads, makeWorker: {
            var scopes = ScopeTable() // one for each thread: its sessions share their scope lists
            return { batch in frames.decode(batch, scopes: &scopes) }
        }) { (decoded: FrameDecoder.Batch) throws(StateLoadError) in
            for record in decoded.records { apply(record) }
            scan.records += decoded.records.count
            if let failure = decoded.failure { throw failure }
            if let end = decoded.end {
                guard end.count == scan.records else {
                    throw StateLoadError(path: path, offset: end.offset, reason: "the snapshot's end marker counts \(end.count) records, the file holds \(scan.records)")
                }
                sawEnd = true
            }
            scan.frames += decoded.frames
        }
        switch walk.stop {
        case nil: break
        case .torn(let offset, let size): scan.tornTail = (offset, size)
        case .damage(let problem): throw problem
        }
        if kind == .snapshot && !sawEnd {
            throw StateLoadError(path: path, offset: file.size, reason: "the snapshot is truncated: its end marker is missing")
        }
        return scan
    }
}

/// Where a state file's frames lie, found from their prefixes alone, in batches of about
/// ``batchBytes`` that one thread decrypts and decodes, and why the walk stopped before the end
/// of the file if it did.
struct FrameWalk: Sendable {
    struct Frame: Sendable {
        let index: Int
        let offset: Int
        let type: UInt8
        let sealedLength: Int
    }

    enum Stop: Sendable {
        /// A journal's last frame, cut short by the end of the file (``StateFileScan/tornTail``).
        case torn(offset: Int, size: Int)
        /// Damage, thrown once every frame before it is read.
        case damage(StateLoadError)
    }

    static let batchBytes = 256 << 10
    /// Bytes read at once while walking prefixes: many frames of a journal, one of a snapshot.
    private static let readAhead = 16 << 10

    let prefixSize: Int
    private(set) var frames: [Frame] = []
    /// Ranges of `frames`.
    private(set) var batches: [Range<Int>] = []
    private(set) var stop: Stop?

    init(_ file: PositionalFile, kind: StateFileHeader.Kind, version: UInt16) {
        prefixSize = FrameLayout.prefixSize(version: version)
        func problem(_ offset: Int, _ reason: String) -> Stop {
            .damage(StateLoadError(path: file.path, offset: offset, reason: reason))
        }
        var read: [UInt8] = []
        var readAt = 0
        var offset = StateFileHeader.size
        var batchStart = 0
        var batchBytes = 0
        while offset < file.size {
            if frames.last?.type == FrameType.end.rawValue {
                stop = problem(offset, "data follows the snapshot's end marker")
                break
            }
            if offset + prefixSize > readAt + read.count {
                do {
                    read = try file.read(at: offset, count: Self.readAhead)
                } catch {
                    stop = .damage(StateLoadError(path: file.path, offset: offset, reason: error.description, kind: .unreadable))
                    break
                }
                readAt = offset
            }
            let prefix = read[(offset - readAt)..<min(offset - readAt + prefixSize, read.count)]
            // A whole prefix whose check fails is damage; a prefix cut short by the end of the
            // file has no length to check.
            var length: Int?
            if prefix.count == prefixSize {
                guard let sealed = FrameLayout.sealedLength(prefix: prefix, version: version) else {
                    stop = problem(offset, "frame \(frames.count)'s length fails its checksum: the file is damaged")
                    break
                }
                guard sealed >= FrameLayout.tag, sealed <= FrameLayout.maxSealed else {
                    stop = problem(offset, "frame \(frames.count) has an impossible length")
                    break
                }
                length = sealed
            }
            guard let length, offset + prefixSize + length <= file.size else {
                // The end of the file cuts this frame short: in a journal, the last write, which
                // a crash interrupted before its sync, so before anything in it was acknowledged.
                stop = kind == .journal
                    ? .torn(offset: offset, size: file.size - offset)
                    : problem(offset, "the file is truncated inside frame \(frames.count)")
                break
            }
            frames.append(Frame(index: frames.count, offset: offset, type: prefix[prefix.startIndex + 4], sealedLength: length))
            offset += prefixSize + length
            batchBytes += prefixSize + length
            if batchBytes >= Self.batchBytes {
                batches.append(batchStart..<frames.count)
                batchStart = frames.count
                batchBytes = 0
            }
        }
        if batchStart < frames.count { batches.append(batchStart..<frames.count) }
    }
}

/// Decrypts and decodes a batch of frames (``FrameWalk``), on any thread.
struct FrameDecoder: Sendable {
    let file: PositionalFile
    let header: [UInt8]
    let key: SymmetricKey
    let walk: FrameWalk

    /// What a batch held, up to its first damaged frame if it has one.
    struct Batch: Sendable {
        var records: [StateRecord] = []
        /// Frames read whole.
        var frames = 0
        /// The count an end marker gives (-1 when malformed), and where it is.
        var end: (count: Int, offset: Int)?
        /// Damage in the frame after the last one read whole (after its records before the damage).
        var failure: StateLoadError?
    }

    func decode(_ index: Int, scopes: inout ScopeTable) -> Batch {
        let frames = walk.frames[walk.batches[index]]
        var batch = Batch()
        func problem(_ offset: Int, _ reason: String) -> Batch {
            batch.failure = StateLoadError(path: file.path, offset: offset, reason: reason)
            return batch
        }
        guard let first = frames.first, let last = frames.last else { return batch }
        let start = first.offset
        let length = last.offset + walk.prefixSize + last.sealedLength - start
        let bytes: [UInt8]
        do {
            bytes = try file.read(at: start, count: length)
        } catch {
            batch.failure = StateLoadError(path: file.path, offset: start, reason: error.description, kind: .unreadable)
            return batch
        }
        guard bytes.count == length else { return problem(start + bytes.count, "the file ended while it was read") }
        for frame in frames {
            let sealedAt = frame.offset - start + walk.prefixSize
            let nonce = Array(bytes[(sealedAt - AESGCM.nonceByteCount)..<sealedAt])
            let plaintext: [UInt8]
            do throws(CryptoError) {
                plaintext = try FrameLayout.open(nonce: nonce, sealed: bytes[sealedAt..<(sealedAt + frame.sealedLength)], type: frame.type,
                                                 index: UInt64(frame.index), header: header, key: key)
            } catch {
                return problem(frame.offset, "frame \(frame.index) fails authentication: the file is damaged")
            }
            switch FrameType(rawValue: frame.type) {
            case .records:
                do throws(StateDecodingError) {
                    try StateRecord.decodeAll(plaintext[...], scopes: &scopes) { batch.records.append($0) }
                } catch {
                    return problem(frame.offset, "frame \(frame.index) holds a record this broker cannot read (\(error.description))")
                }
            case .end:
                batch.end = (plaintext.count == 8 ? Int(BigEndian.read(plaintext, at: 0, width: 8)) : -1, frame.offset)
            case nil:
                return problem(frame.offset, "frame \(frame.index) has an unknown type \(frame.type)")
            }
            batch.frames += 1
        }
        return batch
    }
}
