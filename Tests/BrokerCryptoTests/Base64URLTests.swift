import BrokerCrypto
import Testing

/// RFC 4648 §10 test vectors, which use no characters that differ between the standard and URL
/// alphabets, with the padding removed; plus vectors that exercise `-` (62) and `_` (63).
struct Base64URLTests {
    static let vectors: [(String, String)] = [
        ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"),
        ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"), ("foobar", "Zm9vYmFy"),
    ]

    @Test func rfc4648Vectors() {
        for (plain, encoded) in Self.vectors {
            #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
            #expect(Base64URL.decode(encoded) == Array(plain.utf8))
        }
    }

    @Test func urlAlphabet() {
        #expect(Base64URL.encode([0xfb, 0xff]) == "-_8")
        #expect(Base64URL.encode([0xfb, 0xef, 0xbe]) == "----")
        #expect(Base64URL.encode([0xff, 0xff, 0xff]) == "____")
        #expect(Base64URL.decode("-_8") == [0xfb, 0xff])
        #expect(Base64URL.decode("____") == [0xff, 0xff, 0xff])
        let all = (0...255).map { UInt8($0) }
        let encoded = Base64URL.encode(all)
        #expect(!encoded.contains("+") && !encoded.contains("/") && !encoded.contains("="))
        #expect(Base64URL.decode(encoded) == all)
    }

    @Test func roundTripsEveryLength() {
        for length in 0..<100 {
            let bytes = SecureRandom.bytes(count: length)
            let encoded = Base64URL.encode(bytes)
            #expect(encoded.utf8.count == (length * 4 + 2) / 3)
            #expect(Base64URL.decode(encoded) == bytes, "length \(length)")
            #expect(bytes.withUnsafeBytes { Base64URL.encode($0) } == encoded)
        }
    }

    @Test func decodesSubstrings() {
        let text = "[Zm9vYmFy]"
        #expect(Base64URL.decode(text.dropFirst().dropLast()) == Array("foobar".utf8))
    }

    @Test(arguments: [
        // padding
        "Zg==", "Zg=", "Zm8=", "Zm9v=", "====",
        // impossible lengths (remainder 1 modulo 4)
        "Z", "Zm9vY", "Zm9vYmFyZ",
        // characters outside the URL alphabet
        "Zm+v", "Zm/v", "Zm 9v", "Zm9v\n", " Zm9v", "Zm9v!", "Zmé", "Zm\u{0}v",
        // non-zero unused bits (non-canonical encodings of "f", "fo" and "foob")
        "Zh", "Zm9", "Zm9vYh",
    ])
    func rejects(_ text: String) {
        #expect(Base64URL.decode(text) == nil)
    }
}
