extension [UInt8] {
    /// Appends the bytes of a string literal. Cheaper than `append(contentsOf: "…".utf8)`, which
    /// walks a `String`: answers and log lines on the hot path are mostly literals.
    public mutating func append(literal: StaticString) {
        literal.withUTF8Buffer { append(contentsOf: $0) }
    }
}
