import CryptoShim

/// SHA-256 (FIPS 180-4) through libcrypto.
///
/// Every overload hashes the bytes in place: nothing is copied or allocated on the way to
/// libcrypto (a `String` is hashed through its contiguous UTF-8 storage).
///
/// The functions trap if libcrypto fails, which can only happen when it cannot allocate memory
/// or when the installed OpenSSL lacks SHA-256; there is no result a caller could use instead.
public enum SHA256: Sendable {
    /// Returns the SHA-256 digest of the bytes in `data`.
    public static func hash(_ data: UnsafeRawBufferPointer) -> SHA256Digest {
        var raw: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        let status = Swift.withUnsafeMutableBytes(of: &raw) { out in
            tb_crypto_sha256(data.baseAddress, data.count, out.baseAddress!)
        }
        guard status == 1 else {
            preconditionFailure("SHA256: libcrypto failed to compute a digest")
        }
        return SHA256Digest(rawWords: raw)
    }

    /// Returns the SHA-256 digest of `bytes`.
    public static func hash(_ bytes: [UInt8]) -> SHA256Digest {
        bytes.withUnsafeBytes { hash($0) }
    }

    /// Returns the SHA-256 digest of the UTF-8 encoding of `string`.
    ///
    /// A non-generic overload for the hot path (session tokens): calls from other modules skip
    /// the generic `StringProtocol` machinery, which costs about half as much again as the hash.
    public static func hash(_ string: String) -> SHA256Digest {
        var string = string  // `withUTF8` is mutating; a native string is not copied
        return string.withUTF8 { hash(UnsafeRawBufferPointer($0)) }
    }

    /// Returns the SHA-256 digest of the UTF-8 encoding of `string` (for example a `Substring`).
    public static func hash(_ string: some StringProtocol) -> SHA256Digest {
        string.withUTF8Bytes { hash($0) }
    }
}
