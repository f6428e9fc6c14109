import BrokerCrypto

/// The container both state files share (docs/state.md, "Format"):
///
///     header (32 bytes, plaintext): magic (4) | version (u16) | reserved (u16) | key id (u64)
///                                   | generation (u64) | created, Unix seconds (u64)
///     frames: length of sealed part (u32) | type (u8) | check (u32) | nonce (12) | ciphertext
///             | tag (16)
///
/// Each frame is AES-256-GCM under the key the header names, with the header, the frame type
/// and the frame's index as additional data: frames cannot be moved, swapped between files or
/// reordered without failing authentication. The check is the CRC-32C of the length and type:
/// a length that fails it is damage, so only a frame whose intact length runs past the end of
/// the file is taken for a write a crash cut short. Version 1 frames had no check; they are
/// still read. All integers are big-endian.
struct StateFileHeader: Equatable {
    enum Kind: String {
        case snapshot = "TBSN"
        case journal = "TBJL"
    }

    static let size = 32
    /// The version this broker writes.
    static let version: UInt16 = 2
    /// The versions this broker reads.
    static let readableVersions: ClosedRange<UInt16> = 1...2

    let kind: Kind
    let keyID: UInt64
    /// Snapshot: the first journal generation it does not cover. Journal: its generation.
    let generation: UInt64
    let createdAt: UInt64
    var version = Self.version

    var bytes: [UInt8] {
        var out = Array(kind.rawValue.utf8)
        BigEndian.append(UInt64(version), to: &out, width: 2)
        BigEndian.append(0, to: &out, width: 2)
        BigEndian.append(keyID, to: &out, width: 8)
        BigEndian.append(generation, to: &out, width: 8)
        BigEndian.append(createdAt, to: &out, width: 8)
        return out
    }

    static func parse(_ bytes: [UInt8], expected: Kind) throws(StateFileProblem) -> StateFileHeader {
        guard bytes.count == size else { throw StateFileProblem(offset: 0, "the file is shorter than its header") }
        guard String(decoding: bytes[0..<4], as: UTF8.self) == expected.rawValue else {
            throw StateFileProblem(offset: 0, "this is not a \(expected) file of the broker (wrong magic number)")
        }
        let version = UInt16(BigEndian.read(bytes, at: 4, width: 2))
        guard readableVersions.contains(version) else {
            throw StateFileProblem(offset: 4, "format version \(version) is not one this broker reads (it reads \(readableVersions.lowerBound) to \(readableVersions.upperBound))")
        }
        return StateFileHeader(
            kind: expected,
            keyID: BigEndian.read(bytes, at: 8, width: 8),
            generation: BigEndian.read(bytes, at: 16, width: 8),
            createdAt: BigEndian.read(bytes, at: 24, width: 8),
            version: version
        )
    }
}

/// Frame types.
enum FrameType: UInt8 {
    /// Records.
    case records = 1
    /// The end of a snapshot: the number of records it holds (u64).
    case end = 2
}

enum FrameLayout {
    /// length (4) + type (1) + check (4) + nonce (12); version 1 had no check.
    static func prefixSize(version: UInt16) -> Int { version == 1 ? 17 : 21 }
    static let tag = 16
    /// No frame is larger; a larger length means a damaged file.
    static let maxSealed = 64 << 20

    /// Seals `plaintext` as frame number `index` of the file with `header`.
    static func seal(_ plaintext: [UInt8], type: FrameType, index: UInt64, header: [UInt8], key: SymmetricKey) throws(CryptoError) -> [UInt8] {
        let box = try AESGCM.seal(plaintext, key: key, authenticating: additionalData(header, type.rawValue, index))
        var frame: [UInt8] = []
        frame.reserveCapacity(prefixSize(version: StateFileHeader.version) + plaintext.count + tag)
        BigEndian.append(UInt64(box.ciphertext.count + tag), to: &frame, width: 4)
        frame.append(type.rawValue)
        BigEndian.append(UInt64(CRC32C.checksum(frame)), to: &frame, width: 4)
        frame += box.nonce
        frame += box.ciphertext
        frame += box.tag
        return frame
    }

    /// The length of the sealed part a whole prefix gives, or nil when its check fails.
    static func sealedLength(prefix: ArraySlice<UInt8>, version: UInt16) -> Int? {
        let lengthAndType = prefix.prefix(5)
        if version != 1 && BigEndian.read(prefix, at: 5, width: 4) != CRC32C.checksum(lengthAndType) { return nil }
        return Int(BigEndian.read(lengthAndType, at: 0, width: 4))
    }

    /// Opens a frame's sealed part (nonce excluded) read at `index`.
    static func open(nonce: [UInt8], sealed: ArraySlice<UInt8>, type: UInt8, index: UInt64, header: [UInt8], key: SymmetricKey) throws(CryptoError) -> [UInt8] {
        let box = try AESGCM.SealedBox(nonce: nonce, ciphertext: Array(sealed.dropLast(tag)), tag: Array(sealed.suffix(tag)))
        return try AESGCM.open(box, key: key, authenticating: additionalData(header, type, index))
    }

    /// What each frame authenticates besides itself: the file's header, the frame's type and its
    /// position, so that frames cannot move between files or places.
    private static func additionalData(_ header: [UInt8], _ type: UInt8, _ index: UInt64) -> [UInt8] {
        var data = header
        data.append(type)
        BigEndian.append(index, to: &data, width: 8)
        return data
    }
}

enum BigEndian {
    /// Appends the low `width` bytes of `value`, most significant first.
    static func append(_ value: UInt64, to bytes: inout [UInt8], width: Int) {
        for index in (0..<width).reversed() {
            bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(8 * index)))
        }
    }

    static func read(_ bytes: some RandomAccessCollection<UInt8>, at offset: Int, width: Int) -> UInt64 {
        var value: UInt64 = 0
        var index = bytes.index(bytes.startIndex, offsetBy: offset)
        for _ in 0..<width {
            value = value << 8 | UInt64(bytes[index])
            index = bytes.index(after: index)
        }
        return value
    }
}

/// Where and why a state file is damaged.
struct StateFileProblem: Error, Sendable {
    let offset: Int
    let reason: String

    init(offset: Int, _ reason: String) {
        self.offset = offset
        self.reason = reason
    }
}
