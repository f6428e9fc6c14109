/// A SHA-256 digest: 32 bytes held as four `UInt64` values.
///
/// Built for use as a dictionary key (for example, the hash of a session token): hashing and
/// comparing touch four machine words and allocate nothing. `==` examines all 32 bytes with no
/// early exit, so comparing a stored digest with a candidate does not reveal where they differ.
public struct SHA256Digest: Hashable, Sendable, CustomStringConvertible {
    /// The length of a SHA-256 digest in bytes (32).
    public static let byteCount = 32

    // Bytes 0..<8, 8..<16, 16..<24 and 24..<32, each read as a big-endian integer, so the
    // values (and `hex`) are the same on every platform.
    private let word0: UInt64
    private let word1: UInt64
    private let word2: UInt64
    private let word3: UInt64

    /// Builds a digest from the raw 32 bytes, read in memory order as four `UInt64`s.
    init(rawWords words: (UInt64, UInt64, UInt64, UInt64)) {
        word0 = UInt64(bigEndian: words.0)
        word1 = UInt64(bigEndian: words.1)
        word2 = UInt64(bigEndian: words.2)
        word3 = UInt64(bigEndian: words.3)
    }

    /// Creates a digest from its 32 bytes, or returns `nil` when `bytes` is not 32 bytes long.
    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        let words = bytes.withUnsafeBytes { raw in
            (
                raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self),
                raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self),
                raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self)
            )
        }
        self.init(rawWords: words)
    }

    /// Reads 64 hexadecimal digits (either case), as ``hex`` writes them; nil for anything else.
    public init?(hex: some StringProtocol) {
        let digits = Array(hex.utf8)
        guard digits.count == 2 * Self.byteCount else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.byteCount)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = Self.nibble(digits[index]), let low = Self.nibble(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        self.init(bytes: bytes)
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Calls `body` with the 32 digest bytes, without allocating.
    public func withUnsafeBytes<Result, Failure: Error>(
        _ body: (UnsafeRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        let raw = (word0.bigEndian, word1.bigEndian, word2.bigEndian, word3.bigEndian)
        return try Swift.withUnsafeBytes(of: raw) { (buffer) throws(Failure) -> Result in
            try body(buffer)
        }
    }

    /// The 32 digest bytes.
    public var bytes: [UInt8] {
        withUnsafeBytes { Array($0) }
    }

    /// The digest as 64 lowercase hexadecimal digits.
    public var hex: String {
        String(unsafeUninitializedCapacity: 2 * Self.byteCount) { out in
            withUnsafeBytes { bytes in
                for (index, byte) in bytes.enumerated() {
                    out[2 * index] = Self.hexDigit(byte >> 4)
                    out[2 * index + 1] = Self.hexDigit(byte & 0x0F)
                }
            }
            return 2 * Self.byteCount
        }
    }

    /// The digest in hex (``hex``). A digest reveals nothing about its input, so it is safe to
    /// log, for example to correlate a session's requests without logging its token.
    public var description: String { hex }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }

    /// Compares all 32 bytes without stopping at the first difference.
    public static func == (lhs: SHA256Digest, rhs: SHA256Digest) -> Bool {
        let difference =
            (lhs.word0 ^ rhs.word0) | (lhs.word1 ^ rhs.word1)
            | (lhs.word2 ^ rhs.word2) | (lhs.word3 ^ rhs.word3)
        return difference == 0
    }

    /// A digest is uniformly distributed already: its first word is as good a hash as all
    /// four, for a quarter of the hashing (dictionaries of sessions are looked up per request).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(word0)
    }
}
