import BrokerCrypto
import Testing

/// Vectors from FIPS 180-2, Appendix B (SHA-256 examples), plus the empty message.
struct SHA256Tests {
    @Test func abc() {
        #expect(
            SHA256.hash("abc").hex
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test func emptyMessage() {
        let expected = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        #expect(SHA256.hash("").hex == expected)
        #expect(SHA256.hash([UInt8]()).hex == expected)
    }

    @Test func message448Bits() {
        let message = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
        #expect(
            SHA256.hash(message).hex
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    @Test func oneMillionA() {
        let expected = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        #expect(
            SHA256.hash([UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)).hex == expected)
        #expect(SHA256.hash(String(repeating: "a", count: 1_000_000)).hex == expected)
    }

    @Test func overloadsAgree() {
        let text = "session-token-0123456789"
        let digest = SHA256.hash(text)
        let bytes = Array(text.utf8)
        #expect(SHA256.hash(bytes) == digest)
        #expect(bytes.withUnsafeBytes { SHA256.hash($0) } == digest)
        #expect(SHA256.hash("xx" + text + "yy").hex != digest.hex)
        let padded = "xx" + text + "yy"
        let substring = padded.dropFirst(2).dropLast(2)
        #expect(SHA256.hash(substring) == digest)
    }

    @Test func digestBytesAndHexRoundTrip() throws {
        let digest = SHA256.hash("abc")
        #expect(
            digest.bytes
                == hexBytes("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
        #expect(digest.bytes.count == SHA256Digest.byteCount)
        let rebuilt = try #require(SHA256Digest(bytes: digest.bytes))
        #expect(rebuilt == digest)
        #expect(rebuilt.hex == digest.hex)
        #expect(digest.withUnsafeBytes { Array($0) } == digest.bytes)
        #expect(String(describing: digest) == digest.hex)
    }

    @Test func digestRejectsWrongLength() {
        #expect(SHA256Digest(bytes: [UInt8](repeating: 0, count: 31)) == nil)
        #expect(SHA256Digest(bytes: [UInt8](repeating: 0, count: 33)) == nil)
        #expect(SHA256Digest(bytes: []) == nil)
    }

    @Test func digestEqualityExaminesEveryWord() throws {
        let base = [UInt8](repeating: 0x5A, count: 32)
        let digest = try #require(SHA256Digest(bytes: base))
        for index in [0, 7, 8, 15, 16, 23, 24, 31] {
            let other = try #require(SHA256Digest(bytes: flippingBit(base, at: index)))
            #expect(other != digest, "byte \(index) ignored by ==")
            #expect(other.bytes == flippingBit(base, at: index))
        }
    }

    @Test func digestWorksAsDictionaryKey() {
        var sessions: [SHA256Digest: String] = [:]
        sessions[SHA256.hash("token-a")] = "alice"
        sessions[SHA256.hash("token-b")] = "bob"
        #expect(sessions[SHA256.hash("token-a")] == "alice")
        #expect(sessions[SHA256.hash("token-b")] == "bob")
        #expect(sessions[SHA256.hash("token-c")] == nil)
        #expect(Set([SHA256.hash("x"), SHA256.hash("x"), SHA256.hash("y")]).count == 2)
    }
}
