/// Writing text straight into bytes, for the answers and log lines on the hot path: no `String`
/// is made on the way.
extension [UInt8] {
    /// Appends the bytes of a string literal. Cheaper than `append(contentsOf: "…".utf8)`, which
    /// walks a `String`.
    public mutating func append(literal: StaticString) {
        literal.withUTF8Buffer { append(contentsOf: $0) }
    }

    /// Appends `value` in decimal, with leading zeros up to `minimumDigits` digits.
    public mutating func append(decimal value: Int, minimumDigits: Int = 1) {
        if value < 0 { append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0) // room for the 20 digits of UInt64.max
        Swift.withUnsafeMutableBytes(of: &digits) { buffer in
            var index = buffer.count
            repeat {
                index -= 1
                buffer[index] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0 || buffer.count - index < Swift.min(minimumDigits, buffer.count)
            // Rebased, not a slice: a slice of raw bytes is copied one byte at a time.
            append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[index...]))
        }
    }
}
