/// A statement parameter. Text, numbers and NULL travel in text format; bytes travel in binary
/// format as `bytea`, so that they need no escaping and keep every byte.
public enum PostgresValue: Sendable, Equatable {
    case null
    case text(String)
    case int(Int64)
    case double(Double)
    case bytes([UInt8])
}
