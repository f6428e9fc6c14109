/// The base64 engine behind ``Base64URL`` and ``SymmetricKey/base64``: one alphabet, with or
/// without `=` padding. Pure Swift, one pass, one allocation for the result.
struct Base64Codec: Sendable {
    /// RFC 4648 §5: `-` and `_` for 62 and 63, no padding (JWTs, PKCE, URLs, cookies).
    static let url = Base64Codec(symbols62And63: "-_", padded: false)
    /// RFC 4648 §4: `+` and `/`, padded with `=` (what `openssl rand -base64 32` prints).
    static let standard = Base64Codec(symbols62And63: "+/", padded: true)

    private static let invalid: UInt8 = 0xFF

    private let encoding: [UInt8]  // 64 symbols
    private let decoding: [UInt8]  // 256 entries: the 6-bit value, or `invalid`
    private let padded: Bool

    private init(symbols62And63: String, padded: Bool) {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)
        encoding = alphabet + Array(symbols62And63.utf8)
        var decoding = [UInt8](repeating: Self.invalid, count: 256)
        for (value, symbol) in encoding.enumerated() {
            decoding[Int(symbol)] = UInt8(value)
        }
        self.decoding = decoding
        self.padded = padded
    }

    func encode(_ bytes: UnsafeRawBufferPointer) -> String {
        let remainder = bytes.count % 3
        let tail = remainder == 0 ? 0 : (padded ? 4 : remainder + 1)
        let length = bytes.count / 3 * 4 + tail
        return String(unsafeUninitializedCapacity: length) { out in
            encoding.withUnsafeBufferPointer { symbol in
                var input = 0
                var output = 0
                while input + 3 <= bytes.count {
                    let group =
                        UInt32(bytes[input]) << 16 | UInt32(bytes[input + 1]) << 8
                        | UInt32(bytes[input + 2])
                    out[output] = symbol[Int(group >> 18)]
                    out[output + 1] = symbol[Int(group >> 12 & 0x3F)]
                    out[output + 2] = symbol[Int(group >> 6 & 0x3F)]
                    out[output + 3] = symbol[Int(group & 0x3F)]
                    input += 3
                    output += 4
                }
                if remainder > 0 {
                    let second = remainder == 2 ? UInt32(bytes[input + 1]) : 0
                    let group = UInt32(bytes[input]) << 16 | second << 8
                    out[output] = symbol[Int(group >> 18)]
                    out[output + 1] = symbol[Int(group >> 12 & 0x3F)]
                    if remainder == 2 {
                        out[output + 2] = symbol[Int(group >> 6 & 0x3F)]
                    } else if padded {
                        out[output + 2] = UInt8(ascii: "=")
                    }
                    if padded {
                        out[output + 3] = UInt8(ascii: "=")
                    }
                }
            }
            return length
        }
    }

    /// Decodes strictly: `nil` for a symbol outside the alphabet, wrong or missing padding, an
    /// impossible length, or unused trailing bits that are not zero (so every byte sequence has
    /// exactly one accepted encoding).
    func decode(_ text: UnsafeRawBufferPointer) -> [UInt8]? {
        var count = text.count
        if padded {
            guard count % 4 == 0 else { return nil }
            for _ in 0..<2 where count > 0 && text[count - 1] == UInt8(ascii: "=") {
                count -= 1
            }
        }
        let remainder = count % 4
        guard remainder != 1 else { return nil }
        let length = count / 4 * 3 + (remainder == 0 ? 0 : remainder - 1)
        var rejected: UInt8 = 0  // any invalid symbol sets its high bits
        let bytes = [UInt8](unsafeUninitializedCapacity: length) { out, initialized in
            decoding.withUnsafeBufferPointer { value in
                var input = 0
                var output = 0
                while input + 4 <= count {
                    let a = value[Int(text[input])]
                    let b = value[Int(text[input + 1])]
                    let c = value[Int(text[input + 2])]
                    let d = value[Int(text[input + 3])]
                    rejected |= a | b | c | d
                    out[output] = a << 2 | b >> 4
                    out[output + 1] = b << 4 | c >> 2
                    out[output + 2] = c << 6 | d
                    input += 4
                    output += 3
                }
                if remainder >= 2 {
                    let a = value[Int(text[input])]
                    let b = value[Int(text[input + 1])]
                    rejected |= a | b
                    out[output] = a << 2 | b >> 4
                    if remainder == 2 {
                        rejected |= b & 0x0F == 0 ? 0 : Self.invalid
                    } else {
                        let c = value[Int(text[input + 2])]
                        rejected |= c | (c & 0x03 == 0 ? 0 : Self.invalid)
                        out[output + 1] = b << 4 | c >> 2
                    }
                }
            }
            initialized = length
        }
        return rejected & 0xC0 == 0 ? bytes : nil
    }
}
