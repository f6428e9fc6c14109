/// A log level. The raw values are those of swift-log's `Logger.Level`, so
/// `Logger.Level(rawValue: level.rawValue)` converts.
public enum LogLevel: String, Sendable, Hashable, CaseIterable, Comparable {
    /// Very detailed tracing.
    case trace
    /// Debugging information.
    case debug
    /// Normal operation.
    case info
    /// Normal but significant conditions.
    case notice
    /// Something unexpected that the broker handled.
    case warning
    /// A failed operation.
    case error
    /// The broker cannot go on.
    case critical

    /// Orders levels from `trace` (lowest) to `critical` (highest).
    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool {
        allCases.firstIndex(of: lhs) ?? 0 < allCases.firstIndex(of: rhs) ?? 0
    }
}
