import BrokerCrypto
import Testing

/// RFC 4231 §4 test cases for HMAC-SHA256 (case 5, a truncated output, does not apply).
struct HMACTests {
    struct Vector: Sendable, CustomTestStringConvertible {
        let name: String
        let key: [UInt8]
        let data: [UInt8]
        let mac: String
        var testDescription: String { name }
    }

    static let vectors: [Vector] = [
        Vector(
            name: "case 1", key: [UInt8](repeating: 0x0b, count: 20), data: Array("Hi There".utf8),
            mac: "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
        Vector(
            name: "case 2", key: Array("Jefe".utf8),
            data: Array("what do ya want for nothing?".utf8),
            mac: "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        Vector(
            name: "case 3", key: [UInt8](repeating: 0xaa, count: 20),
            data: [UInt8](repeating: 0xdd, count: 50),
            mac: "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
        Vector(
            name: "case 4", key: hexBytes("0102030405060708090a0b0c0d0e0f10111213141516171819"),
            data: [UInt8](repeating: 0xcd, count: 50),
            mac: "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
        Vector(
            name: "case 6", key: [UInt8](repeating: 0xaa, count: 131),
            data: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
            mac: "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
        Vector(
            name: "case 7", key: [UInt8](repeating: 0xaa, count: 131),
            data: Array(
                ("This is a test using a larger than block-size key and a larger than block-size "
                    + "data. The key needs to be hashed before being used by the HMAC algorithm.")
                    .utf8),
            mac: "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
    ]

    @Test(arguments: vectors)
    func rfc4231(_ vector: Vector) {
        let mac = HMACSHA256.authenticationCode(for: vector.data, key: vector.key)
        #expect(hexString(mac) == vector.mac)
        #expect(mac.count == HMACSHA256.byteCount)
    }

    @Test func stringMessageMatchesBytes() {
        let key = Array("Jefe".utf8)
        let mac = HMACSHA256.authenticationCode(for: "what do ya want for nothing?", key: key)
        #expect(
            hexString(mac) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test func symmetricKeyMatchesRawKey() throws {
        let raw = (0..<32).map { UInt8($0) }
        let key = try SymmetricKey(bytes: raw)
        let message = Array("state=abc".utf8)
        let expected = HMACSHA256.authenticationCode(for: message, key: raw)
        #expect(HMACSHA256.authenticationCode(for: message, key: key) == expected)
        #expect(HMACSHA256.authenticationCode(for: "state=abc", key: key) == expected)
        #expect(HMACSHA256.authenticationCode(for: "state=abd", key: key) != expected)
    }

    @Test func emptyKeyAndMessage() {
        // HMAC-SHA256 with an empty key over an empty message (checked with Python's hmac).
        #expect(
            hexString(HMACSHA256.authenticationCode(for: [UInt8](), key: []))
                == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
    }

    @Test func verification() throws {
        let key = SymmetricKey.generate()
        let code = HMACSHA256.authenticationCode(for: "payload", key: key)
        #expect(HMACSHA256.isValidAuthenticationCode(code, for: "payload", key: key))
        #expect(HMACSHA256.isValidAuthenticationCode(code, for: Array("payload".utf8), key: key))
        #expect(!HMACSHA256.isValidAuthenticationCode(code, for: "payloae", key: key))
        #expect(
            !HMACSHA256.isValidAuthenticationCode(
                flippingBit(code, at: 31), for: "payload", key: key))
        #expect(
            !HMACSHA256.isValidAuthenticationCode(Array(code.prefix(16)), for: "payload", key: key))
        #expect(
            !HMACSHA256.isValidAuthenticationCode(
                code, for: "payload", key: SymmetricKey.generate()))
    }
}
