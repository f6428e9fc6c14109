import CryptoShim

/// AES-256-GCM authenticated encryption (NIST SP 800-38D) through libcrypto, with 12-byte
/// nonces and 16-byte tags.
///
/// A nonce must never be used twice with the same key. Let ``seal(_:key:nonce:authenticating:)``
/// draw a random nonce (pass `nil`, the default): with random 96-bit nonces, keep the number of
/// messages sealed under one key well below 2³² and rotate the key before then.
public enum AESGCM: Sendable {
    /// The length of a nonce in bytes (12).
    public static let nonceByteCount = 12
    /// The length of an authentication tag in bytes (16).
    public static let tagByteCount = 16

    /// Encrypts `plaintext` and authenticates it together with `aad`.
    ///
    /// - Parameters:
    ///   - plaintext: The bytes to encrypt.
    ///   - key: The 256-bit key.
    ///   - nonce: A 12-byte nonce, or `nil` (the default) for 12 fresh random bytes.
    ///   - aad: Additional data that is authenticated but not encrypted; the same bytes must be
    ///     passed to ``open(_:key:authenticating:)``.
    /// - Throws: ``CryptoError/invalidNonceLength`` for a nonce that is not 12 bytes, or
    ///   ``CryptoError/libraryFailure`` if libcrypto fails.
    public static func seal(
        _ plaintext: [UInt8],
        key: SymmetricKey,
        nonce: [UInt8]? = nil,
        authenticating aad: [UInt8] = []
    ) throws(CryptoError) -> SealedBox {
        let nonce = nonce ?? SecureRandom.bytes(count: nonceByteCount)
        guard nonce.count == nonceByteCount else { throw .invalidNonceLength }
        var tag = [UInt8](repeating: 0, count: tagByteCount)
        var status: Int32 = 0
        let ciphertext = [UInt8](unsafeUninitializedCapacity: plaintext.count) { out, initialized in
            status = key.withUnsafeBytes { key in
                nonce.withUnsafeBytes { nonce in
                    aad.withUnsafeBytes { aad in
                        plaintext.withUnsafeBytes { plaintext in
                            tag.withUnsafeMutableBytes { tag in
                                tb_crypto_aes256gcm_seal(
                                    key.baseAddress!, nonce.baseAddress!,
                                    aad.baseAddress, aad.count,
                                    plaintext.baseAddress, plaintext.count,
                                    out.baseAddress, tag.baseAddress!
                                )
                            }
                        }
                    }
                }
            }
            initialized = status == 1 ? plaintext.count : 0
        }
        guard status == 1 else { throw .libraryFailure }
        return SealedBox(validNonce: nonce, ciphertext: ciphertext, tag: tag)
    }

    /// Verifies `box` against `key` and `aad` and returns the decrypted plaintext.
    ///
    /// No plaintext is released unless the tag verifies.
    ///
    /// - Throws: ``CryptoError/authenticationFailure`` when the ciphertext, tag or nonce was
    ///   altered, `aad` differs from the data passed when sealing, or `key` is not the sealing
    ///   key. An internal libcrypto failure is reported the same way.
    public static func open(
        _ box: SealedBox,
        key: SymmetricKey,
        authenticating aad: [UInt8] = []
    ) throws(CryptoError) -> [UInt8] {
        let ciphertext = box.ciphertext
        var status: Int32 = 0
        let plaintext = [UInt8](unsafeUninitializedCapacity: ciphertext.count) { out, initialized in
            status = key.withUnsafeBytes { key in
                box.nonce.withUnsafeBytes { nonce in
                    aad.withUnsafeBytes { aad in
                        ciphertext.withUnsafeBytes { ciphertext in
                            box.tag.withUnsafeBytes { tag in
                                tb_crypto_aes256gcm_open(
                                    key.baseAddress!, nonce.baseAddress!,
                                    aad.baseAddress, aad.count,
                                    ciphertext.baseAddress, ciphertext.count,
                                    tag.baseAddress!, out.baseAddress
                                )
                            }
                        }
                    }
                }
            }
            initialized = status == 1 ? ciphertext.count : 0
        }
        guard status == 1 else { throw .authenticationFailure }
        return plaintext
    }
}
