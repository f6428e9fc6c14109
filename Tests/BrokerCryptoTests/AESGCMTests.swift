import BrokerCrypto
import Testing

/// Known-answer vectors: test cases 13–16 (the AES-256 cases) of McGrew & Viega,
/// "The Galois/Counter Mode of Operation (GCM)", revised 2005, Appendix B.
struct AESGCMTests {
    struct Vector: Sendable, CustomTestStringConvertible {
        let name: String
        let key: String
        let nonce: String
        let plaintext: String
        let aad: String
        let ciphertext: String
        let tag: String
        var testDescription: String { name }
    }

    static let key1516 = "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308"
    static let vectors: [Vector] = [
        Vector(
            name: "test case 13", key: String(repeating: "00", count: 32),
            nonce: String(repeating: "00", count: 12), plaintext: "", aad: "", ciphertext: "",
            tag: "530f8afbc74536b9a963b4f1c4cb738b"),
        Vector(
            name: "test case 14", key: String(repeating: "00", count: 32),
            nonce: String(repeating: "00", count: 12),
            plaintext: String(repeating: "00", count: 16),
            aad: "", ciphertext: "cea7403d4d606b6e074ec5d3baf39d18",
            tag: "d0d1c8a799996bf0265b98b5d48ab919"),
        Vector(
            name: "test case 15", key: key1516, nonce: "cafebabefacedbaddecaf888",
            plaintext: "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
                + "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255",
            aad: "",
            ciphertext: "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
                + "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad",
            tag: "b094dac5d93471bdec1a502270e3cc6c"),
        Vector(
            name: "test case 16", key: key1516, nonce: "cafebabefacedbaddecaf888",
            plaintext: "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
                + "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
            aad: "feedfacedeadbeeffeedfacedeadbeefabaddad2",
            ciphertext: "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
                + "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
            tag: "76fc6ece0f4e1768cddf8853bb2d551b"),
    ]

    @Test(arguments: vectors)
    func knownAnswer(_ vector: Vector) throws {
        let key = try SymmetricKey(bytes: hexBytes(vector.key))
        let box = try AESGCM.seal(
            hexBytes(vector.plaintext), key: key, nonce: hexBytes(vector.nonce),
            authenticating: hexBytes(vector.aad))
        #expect(hexString(box.nonce) == vector.nonce)
        #expect(hexString(box.ciphertext) == vector.ciphertext)
        #expect(hexString(box.tag) == vector.tag)
        #expect(hexString(box.combined) == vector.nonce + vector.ciphertext + vector.tag)

        let received = try AESGCM.SealedBox(
            combined: hexBytes(vector.nonce + vector.ciphertext + vector.tag))
        let opened = try AESGCM.open(received, key: key, authenticating: hexBytes(vector.aad))
        #expect(hexString(opened) == vector.plaintext)
    }

    static func sealedSample() throws -> (SymmetricKey, AESGCM.SealedBox) {
        let key = SymmetricKey.generate()
        let box = try AESGCM.seal(
            Array("refresh-token-42".utf8), key: key, authenticating: Array("user-7".utf8))
        return (key, box)
    }

    @Test func tamperedTagFails() throws {
        let (key, box) = try Self.sealedSample()
        for index in [0, 15] {
            let forged = try AESGCM.SealedBox(
                nonce: box.nonce, ciphertext: box.ciphertext, tag: flippingBit(box.tag, at: index))
            #expect(throws: CryptoError.authenticationFailure) {
                try AESGCM.open(forged, key: key, authenticating: Array("user-7".utf8))
            }
        }
    }

    @Test func tamperedCiphertextFails() throws {
        let (key, box) = try Self.sealedSample()
        let forged = try AESGCM.SealedBox(
            nonce: box.nonce, ciphertext: flippingBit(box.ciphertext, at: 3), tag: box.tag)
        #expect(throws: CryptoError.authenticationFailure) {
            try AESGCM.open(forged, key: key, authenticating: Array("user-7".utf8))
        }
        let truncated = try AESGCM.SealedBox(
            nonce: box.nonce, ciphertext: Array(box.ciphertext.dropLast()), tag: box.tag)
        #expect(throws: CryptoError.authenticationFailure) {
            try AESGCM.open(truncated, key: key, authenticating: Array("user-7".utf8))
        }
    }

    @Test func tamperedNonceFails() throws {
        let (key, box) = try Self.sealedSample()
        let forged = try AESGCM.SealedBox(
            nonce: flippingBit(box.nonce, at: 11), ciphertext: box.ciphertext, tag: box.tag)
        #expect(throws: CryptoError.authenticationFailure) {
            try AESGCM.open(forged, key: key, authenticating: Array("user-7".utf8))
        }
    }

    @Test func aadMismatchFails() throws {
        let (key, box) = try Self.sealedSample()
        #expect(throws: CryptoError.authenticationFailure) {
            try AESGCM.open(box, key: key, authenticating: Array("user-8".utf8))
        }
        #expect(throws: CryptoError.authenticationFailure) {
            try AESGCM.open(box, key: key)
        }
        #expect(
            try AESGCM.open(box, key: key, authenticating: Array("user-7".utf8))
                == Array("refresh-token-42".utf8))
    }

    @Test func wrongKeyFails() throws {
        let (_, box) = try Self.sealedSample()
        #expect(throws: CryptoError.authenticationFailure) {
            try AESGCM.open(box, key: SymmetricKey.generate(), authenticating: Array("user-7".utf8))
        }
    }

    @Test(arguments: [0, 1, 15, 16, 17, 1000, 1 << 20])
    func roundTrip(length: Int) throws {
        let key = SymmetricKey.generate()
        let plaintext = SecureRandom.bytes(count: length)
        let box = try AESGCM.seal(plaintext, key: key, authenticating: [1, 2, 3])
        #expect(box.ciphertext.count == length)
        #expect(box.combined.count == length + AESGCM.nonceByteCount + AESGCM.tagByteCount)
        let parsed = try AESGCM.SealedBox(combined: box.combined)
        #expect(parsed == box)
        #expect(try AESGCM.open(parsed, key: key, authenticating: [1, 2, 3]) == plaintext)
    }

    @Test func randomNoncesDiffer() throws {
        let key = SymmetricKey.generate()
        let first = try AESGCM.seal(Array("same".utf8), key: key)
        let second = try AESGCM.seal(Array("same".utf8), key: key)
        #expect(first.nonce.count == AESGCM.nonceByteCount)
        #expect(first.nonce != second.nonce)
        #expect(first.ciphertext != second.ciphertext)
    }

    @Test func rejectsBadLengths() throws {
        let key = SymmetricKey.generate()
        #expect(throws: CryptoError.invalidNonceLength) {
            try AESGCM.seal([1], key: key, nonce: [UInt8](repeating: 0, count: 11))
        }
        #expect(throws: CryptoError.invalidNonceLength) {
            try AESGCM.seal([1], key: key, nonce: [UInt8](repeating: 0, count: 16))
        }
        #expect(throws: CryptoError.malformedSealedBox) {
            try AESGCM.SealedBox(combined: [UInt8](repeating: 0, count: 27))
        }
        #expect(throws: CryptoError.invalidNonceLength) {
            try AESGCM.SealedBox(nonce: [0], ciphertext: [], tag: [UInt8](repeating: 0, count: 16))
        }
        #expect(throws: CryptoError.malformedSealedBox) {
            try AESGCM.SealedBox(nonce: [UInt8](repeating: 0, count: 12), ciphertext: [], tag: [0])
        }
        let empty = try AESGCM.SealedBox(combined: [UInt8](repeating: 0, count: 28))
        #expect(empty.ciphertext.isEmpty)
        #expect(throws: CryptoError.authenticationFailure) { try AESGCM.open(empty, key: key) }
    }
}
