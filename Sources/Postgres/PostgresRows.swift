/// A statement's result, copied out of libpq's `PGresult` (which is freed at once). Values are in
/// PostgreSQL's text format; `bytea` columns are decoded from their hex form by ``bytes(_:_:)``.
public struct PostgresRows: Sendable {
    /// Rows of columns; nil is SQL NULL.
    let values: [[String?]]
    /// Rows a command touched (`UPDATE`, `DELETE`, `INSERT`), or returned.
    public let affected: Int

    public var count: Int { values.count }

    public func isNull(_ row: Int, _ column: Int) -> Bool { values[row][column] == nil }

    public func string(_ row: Int, _ column: Int) -> String? { values[row][column] }

    public func int(_ row: Int, _ column: Int) -> Int64? { values[row][column].flatMap { Int64($0) } }

    public func double(_ row: Int, _ column: Int) -> Double? { values[row][column].flatMap { Double($0) } }

    public func bool(_ row: Int, _ column: Int) -> Bool? { values[row][column].map { $0 == "t" } }

    /// A `bytea` column (`\x` and hex digits in text format).
    public func bytes(_ row: Int, _ column: Int) -> [UInt8]? {
        guard let text = values[row][column] else { return nil }
        let hex = Array(text.utf8)
        guard hex.count >= 2, hex[0] == UInt8(ascii: "\\"), hex[1] == UInt8(ascii: "x"), hex.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity((hex.count - 2) / 2)
        var index = 2
        while index < hex.count {
            guard let high = Self.nibble(hex[index]), let low = Self.nibble(hex[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func nibble(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
