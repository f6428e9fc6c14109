import BrokerCrypto
import Testing

struct SymmetricKeyTests {
    static let sampleBytes = (0..<32).map { UInt8($0) }
    /// Python: base64.b64encode(bytes(range(32)))
    static let sampleBase64 = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

    @Test func base64RoundTrip() throws {
        let key = try SymmetricKey(bytes: Self.sampleBytes)
        #expect(key.base64 == Self.sampleBase64)
        let parsed = try #require(SymmetricKey(base64: Self.sampleBase64))
        #expect(parsed.withUnsafeBytes { Array($0) } == Self.sampleBytes)
        let generated = SymmetricKey.generate()
        #expect(SymmetricKey(base64: generated.base64)?.base64 == generated.base64)
        #expect(generated.base64.utf8.count == 44)
    }

    @Test func standardAlphabetWithPadding() throws {
        let key = try SymmetricKey(bytes: [UInt8](repeating: 0xfb, count: 32))
        #expect(key.base64 == "+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/s=")
        #expect(SymmetricKey(base64: "-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_s=") == nil)
        #expect(SymmetricKey(base64: "+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/v7+/s") == nil)
    }

    @Test(arguments: [
        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHg==",  // 31 bytes
        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gIQ==",  // 34 bytes
        "", "not base64 at all", " AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
    ])
    func rejectsBadBase64(_ text: String) {
        #expect(SymmetricKey(base64: text) == nil)
    }

    @Test func rejectsWrongByteCount() {
        for count in [0, 16, 31, 33, 64] {
            #expect(throws: CryptoError.invalidKeyLength) {
                try SymmetricKey(bytes: [UInt8](repeating: 1, count: count))
            }
        }
    }

    @Test func generatedKeysDiffer() {
        let keys = (0..<20).map { _ in SymmetricKey.generate().base64 }
        #expect(Set(keys).count == keys.count)
    }

    @Test func descriptionsAreRedacted() throws {
        let key = try SymmetricKey(bytes: [UInt8](repeating: 0x41, count: 32))
        let redacted = "SymmetricKey(<redacted>)"
        #expect(String(describing: key) == redacted)
        #expect(String(reflecting: key) == redacted)
        #expect("\(key)" == redacted)
        #expect(key.description == redacted)
        #expect(key.debugDescription == redacted)
        #expect(String(describing: [key]) == "[\(redacted)]")
        #expect(String(describing: Optional(key)) == "Optional(\(redacted))")

        var dumped = ""
        dump(key, to: &dumped)
        #expect(dumped.contains("<redacted>"))
        #expect(!dumped.contains("65") && !dumped.contains("41") && !dumped.contains(key.base64))
        #expect(!dumped.contains("storage") && !dumped.contains("0x"))
        #expect(Mirror(reflecting: key).children.isEmpty)
    }
}
