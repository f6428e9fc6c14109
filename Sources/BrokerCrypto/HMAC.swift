import CryptoShim

/// HMAC-SHA256 (RFC 2104) through libcrypto.
///
/// Keys of any length are accepted (longer than 64 bytes are hashed first, as RFC 2104 says).
/// The functions trap if libcrypto fails, which can only happen when it cannot allocate memory
/// or when the installed OpenSSL lacks HMAC or SHA-256.
public enum HMACSHA256: Sendable {
    /// The length of an HMAC-SHA256 authentication code in bytes (32).
    public static let byteCount = 32

    /// Returns the 32-byte authentication code of `message` under `key`.
    public static func authenticationCode(
        for message: UnsafeRawBufferPointer,
        key: UnsafeRawBufferPointer
    ) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: byteCount) { out, initialized in
            let status = tb_crypto_hmac_sha256(
                key.baseAddress, key.count, message.baseAddress, message.count, out.baseAddress!
            )
            guard status == 1 else {
                preconditionFailure("HMACSHA256: libcrypto failed to compute a code")
            }
            initialized = byteCount
        }
    }

    /// Returns the 32-byte authentication code of `message` under `key`.
    public static func authenticationCode(for message: [UInt8], key: [UInt8]) -> [UInt8] {
        message.withUnsafeBytes { message in
            key.withUnsafeBytes { key in authenticationCode(for: message, key: key) }
        }
    }

    /// Returns the 32-byte authentication code of the UTF-8 encoding of `message` under `key`.
    public static func authenticationCode(
        for message: some StringProtocol,
        key: [UInt8]
    ) -> [UInt8] {
        message.withUTF8Bytes { message in
            key.withUnsafeBytes { key in authenticationCode(for: message, key: key) }
        }
    }

    /// Returns the 32-byte authentication code of `message` under a symmetric key.
    public static func authenticationCode(for message: [UInt8], key: SymmetricKey) -> [UInt8] {
        message.withUnsafeBytes { message in
            key.withUnsafeBytes { key in authenticationCode(for: message, key: key) }
        }
    }

    /// Returns the 32-byte authentication code of the UTF-8 encoding of `message` under a
    /// symmetric key.
    public static func authenticationCode(
        for message: some StringProtocol,
        key: SymmetricKey
    ) -> [UInt8] {
        message.withUTF8Bytes { message in
            key.withUnsafeBytes { key in authenticationCode(for: message, key: key) }
        }
    }

    /// Tells whether `code` is the authentication code of `message` under `key`, comparing in
    /// constant time with `constantTimeEquals(_:_:)`.
    ///
    /// Always verify codes with this rather than `==`, which stops at the first wrong byte.
    public static func isValidAuthenticationCode(
        _ code: [UInt8],
        for message: [UInt8],
        key: SymmetricKey
    ) -> Bool {
        constantTimeEquals(code, authenticationCode(for: message, key: key))
    }

    /// Tells whether `code` is the authentication code of the UTF-8 encoding of `message` under
    /// `key`, comparing in constant time with `constantTimeEquals(_:_:)`.
    public static func isValidAuthenticationCode(
        _ code: [UInt8],
        for message: some StringProtocol,
        key: SymmetricKey
    ) -> Bool {
        constantTimeEquals(code, authenticationCode(for: message, key: key))
    }
}
