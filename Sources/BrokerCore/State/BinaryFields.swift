import BrokerCrypto

/// The encoding of state records: a sequence of fields, each `tag (1 byte) | length (varint) |
/// value`. Tags are fixed forever (documented in the README); readers skip tags they do not
/// know, so a newer broker can add fields that an older one ignores.
struct FieldWriter {
    private(set) var bytes: [UInt8] = []

    /// A writer whose buffer takes `capacity` bytes before it grows: a snapshot writes a million
    /// records, each through a writer of its own.
    init(capacity: Int = 0) {
        bytes.reserveCapacity(capacity)
    }

    mutating func bytes(_ tag: UInt8, _ value: [UInt8]) {
        bytes.append(tag)
        Self.appendVarint(UInt64(value.count), to: &bytes)
        bytes += value
    }

    mutating func string(_ tag: UInt8, _ value: String) {
        bytes.append(tag)
        Self.appendVarint(UInt64(value.utf8.count), to: &bytes)
        bytes.append(contentsOf: value.utf8)
    }

    mutating func string(_ tag: UInt8, _ value: String?) {
        if let value { string(tag, value) }
    }

    mutating func double(_ tag: UInt8, _ value: Double) {
        bytes.append(tag)
        bytes.append(8)
        withUnsafeBytes(of: value.bitPattern.bigEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func double(_ tag: UInt8, _ value: Double?) {
        if let value { double(tag, value) }
    }

    mutating func digest(_ tag: UInt8, _ value: SHA256Digest) {
        bytes.append(tag)
        bytes.append(UInt8(SHA256Digest.byteCount))
        value.withUnsafeBytes { bytes.append(contentsOf: $0) }
    }

    /// `words` joined by single spaces, as one text field, without making the joined string.
    mutating func joined(_ tag: UInt8, _ words: [String]) {
        bytes.append(tag)
        Self.appendVarint(UInt64(words.reduce(0) { $0 + $1.utf8.count } + max(words.count - 1, 0)), to: &bytes)
        for (index, word) in words.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: " ")) }
            bytes.append(contentsOf: word.utf8)
        }
    }

    mutating func digest(_ tag: UInt8, _ value: SHA256Digest?) {
        if let value { digest(tag, value) }
    }

    mutating func flag(_ tag: UInt8, _ value: Bool) {
        if value { bytes(tag, [1]) }
    }

    static func appendVarint(_ value: UInt64, to bytes: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }
}

/// Reads the fields of one record. Any malformation is a `StateDecodingError`.
///
/// Field positions sit in a fixed inline table (tags 0...23; none is higher today, and higher
/// ones are skipped like unknown ones): a restart decodes a million records, and a dictionary
/// per record was most of its cost.
struct FieldReader {
    /// Tags below this are read; a record's highest today is 16 (a session's provider key).
    private static let tags = 24
    private let record: ArraySlice<UInt8>
    private var positions = InlineArray<24, Range<Int>?>(repeating: nil)

    init(_ bytes: ArraySlice<UInt8>) throws(StateDecodingError) {
        record = bytes
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let tag = bytes[index]
            index += 1
            let length = try Self.varint(bytes, &index)
            guard length <= UInt64(bytes.endIndex - index) else { throw StateDecodingError("a field runs past its record") }
            let end = index + Int(length)
            if tag < Self.tags { positions[Int(tag)] = index..<end }
            index = end
        }
    }

    private subscript(tag: UInt8) -> ArraySlice<UInt8>? {
        tag < Self.tags ? positions[Int(tag)].map { record[$0] } : nil
    }

    func bytes(_ tag: UInt8) -> [UInt8]? { self[tag].map(Array.init) }

    func string(_ tag: UInt8) throws(StateDecodingError) -> String? {
        guard let raw = self[tag] else { return nil }
        // ASCII (almost every field: tokens, ids, scopes) is UTF-8 as it is, and decoding it takes
        // the standard library's specialised path; `String(validating:as:)` is generic at run
        // time, and its type lookups were a tenth of a 1M-session load.
        let text = raw.withUnsafeBufferPointer { bytes in
            bytes.allSatisfy { $0 < 0x80 } ? String(decoding: bytes, as: UTF8.self) : String(validating: bytes, as: UTF8.self)
        }
        guard let text else { throw StateDecodingError("a text field is not UTF-8") }
        return text
    }

    func requiredString(_ tag: UInt8) throws(StateDecodingError) -> String {
        guard let text = try string(tag) else { throw StateDecodingError("field \(tag) is missing") }
        return text
    }

    func double(_ tag: UInt8) throws(StateDecodingError) -> Double? {
        guard let raw = self[tag] else { return nil }
        guard raw.count == 8 else { throw StateDecodingError("a number field is not 8 bytes") }
        return Double(bitPattern: raw.reduce(0) { $0 << 8 | UInt64($1) })
    }

    func requiredDouble(_ tag: UInt8) throws(StateDecodingError) -> Double {
        guard let value = try double(tag) else { throw StateDecodingError("field \(tag) is missing") }
        return value
    }

    func digest(_ tag: UInt8) throws(StateDecodingError) -> SHA256Digest? {
        guard let raw = self[tag] else { return nil }
        guard let digest = SHA256Digest(bytes: Array(raw)) else { throw StateDecodingError("a hash field is not 32 bytes") }
        return digest
    }

    func requiredDigest(_ tag: UInt8) throws(StateDecodingError) -> SHA256Digest {
        guard let digest = try digest(tag) else { throw StateDecodingError("field \(tag) is missing") }
        return digest
    }

    func flag(_ tag: UInt8) -> Bool { self[tag]?.first == 1 }

    static func varint(_ bytes: ArraySlice<UInt8>, _ index: inout Int) throws(StateDecodingError) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard index < bytes.endIndex, shift < 64 else { throw StateDecodingError("a length is cut off or too long") }
            let byte = bytes[index]
            index += 1
            value |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return value }
            shift += 7
        }
    }
}

/// A record that cannot be decoded (inside a frame whose authentication succeeded: a bug or a
/// format from another version, never a torn write).
struct StateDecodingError: Error, Sendable, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}
