extension AESGCM {
    /// The output of ``AESGCM/seal(_:key:nonce:authenticating:)``: nonce, ciphertext and tag.
    ///
    /// Every initializer checks the part lengths, so a box in hand always has a 12-byte nonce
    /// and a 16-byte tag. Its contents are not secret (that is the point of encryption), so it
    /// is `Hashable` and prints normally.
    public struct SealedBox: Hashable, Sendable {
        /// The 12-byte nonce.
        public let nonce: [UInt8]
        /// The encrypted bytes; as long as the plaintext.
        public let ciphertext: [UInt8]
        /// The 16-byte authentication tag.
        public let tag: [UInt8]

        /// Creates a box from its parts, for example when they are stored separately.
        ///
        /// - Throws: ``CryptoError/invalidNonceLength`` for a nonce that is not 12 bytes, or
        ///   ``CryptoError/malformedSealedBox`` for a tag that is not 16 bytes.
        public init(nonce: [UInt8], ciphertext: [UInt8], tag: [UInt8]) throws(CryptoError) {
            guard nonce.count == AESGCM.nonceByteCount else { throw .invalidNonceLength }
            guard tag.count == AESGCM.tagByteCount else { throw .malformedSealedBox }
            self.init(validNonce: nonce, ciphertext: ciphertext, tag: tag)
        }

        /// Splits the serialized form `nonce ‖ ciphertext ‖ tag` (see ``combined``).
        ///
        /// - Throws: ``CryptoError/malformedSealedBox`` when `combined` is shorter than 28
        ///   bytes (a nonce and a tag around an empty ciphertext).
        public init(combined: [UInt8]) throws(CryptoError) {
            let overhead = AESGCM.nonceByteCount + AESGCM.tagByteCount
            guard combined.count >= overhead else { throw .malformedSealedBox }
            let tagStart = combined.count - AESGCM.tagByteCount
            self.init(
                validNonce: Array(combined[..<AESGCM.nonceByteCount]),
                ciphertext: Array(combined[AESGCM.nonceByteCount..<tagStart]),
                tag: Array(combined[tagStart...])
            )
        }

        /// For parts whose lengths the caller has already checked.
        init(validNonce nonce: [UInt8], ciphertext: [UInt8], tag: [UInt8]) {
            self.nonce = nonce
            self.ciphertext = ciphertext
            self.tag = tag
        }

        /// The serialized form: `nonce ‖ ciphertext ‖ tag`, 28 bytes longer than the plaintext.
        public var combined: [UInt8] {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(nonce.count + ciphertext.count + tag.count)
            bytes += nonce
            bytes += ciphertext
            bytes += tag
            return bytes
        }
    }
}
