import CryptoShim

/// A 256-bit secret key for ``AESGCM`` and ``HMACSHA256``.
///
/// The key bytes live in memory owned by the key and are zeroed when the last copy of the key
/// goes away. The key never prints itself: `description`, `debugDescription` and its mirror
/// show only `SymmetricKey(<redacted>)`, so a key caught in a log line or a `dump` leaks
/// nothing. Use ``base64`` only to write the key to its secret store.
public struct SymmetricKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The length of the key in bytes (32).
    public static let byteCount = 32

    private let storage: Storage

    /// Creates a key from exactly 32 bytes.
    ///
    /// - Throws: ``CryptoError/invalidKeyLength`` when `bytes` is not 32 bytes long.
    public init(bytes: [UInt8]) throws(CryptoError) {
        guard bytes.count == Self.byteCount else { throw .invalidKeyLength }
        storage = bytes.withUnsafeBytes { source in Storage { $0.copyMemory(from: source) } }
    }

    /// Creates a key from its base64 form (RFC 4648 §4, standard alphabet, `=` padded), the form
    /// ``base64`` returns and `openssl rand -base64 32` prints.
    ///
    /// Returns `nil` when the text is not strict padded base64 or does not decode to 32 bytes.
    /// Surrounding whitespace is not accepted; trim it first.
    public init?(base64: some StringProtocol) {
        guard var bytes = base64.withUTF8Bytes({ Base64Codec.standard.decode($0) }) else {
            return nil
        }
        defer { bytes.withUnsafeMutableBytes { tb_crypto_cleanse($0.baseAddress, $0.count) } }
        guard let key = try? SymmetricKey(bytes: bytes) else { return nil }
        self = key
    }

    /// Returns a new key of 32 bytes from ``SecureRandom``.
    public static func generate() -> SymmetricKey {
        SymmetricKey(storage: Storage(SecureRandom.fill))
    }

    private init(storage: Storage) {
        self.storage = storage
    }

    /// The key in base64 (standard alphabet, `=` padded): 44 characters. This string is the
    /// secret; store it as one.
    public var base64: String {
        withUnsafeBytes { Base64Codec.standard.encode($0) }
    }

    /// Calls `body` with the 32 key bytes. Do not let the pointer escape `body`.
    public func withUnsafeBytes<Result, Failure: Error>(
        _ body: (UnsafeRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try body(UnsafeRawBufferPointer(start: storage.bytes, count: Self.byteCount))
    }

    /// Always `SymmetricKey(<redacted>)`.
    public var description: String { "SymmetricKey(<redacted>)" }

    /// Always `SymmetricKey(<redacted>)`.
    public var debugDescription: String { description }

    /// A mirror with no children, so `dump` and reflection cannot reach the key bytes.
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

extension SymmetricKey {
    /// Owns the 32 key bytes and zeroes them on deinit.
    ///
    /// `@unchecked Sendable`: the bytes are written once in `init`, only read afterwards, and
    /// freed in `deinit`, when no other reference to them can exist.
    private final class Storage: @unchecked Sendable {
        let bytes: UnsafeMutableRawPointer

        /// Allocates the 32 bytes and lets `initialize` write all of them.
        init(_ initialize: (UnsafeMutableRawBufferPointer) -> Void) {
            bytes = UnsafeMutableRawPointer.allocate(
                byteCount: SymmetricKey.byteCount, alignment: MemoryLayout<UInt64>.alignment
            )
            initialize(UnsafeMutableRawBufferPointer(start: bytes, count: SymmetricKey.byteCount))
        }

        deinit {
            tb_crypto_cleanse(bytes, SymmetricKey.byteCount)
            bytes.deallocate()
        }
    }
}
