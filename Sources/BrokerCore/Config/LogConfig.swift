/// Logging settings: the `log` section.
public struct LogConfig: Sendable, Equatable {
    /// The lowest level written.
    public var level: LogLevel
    /// How log lines are written.
    public var format: LogFormat
    /// Whether each request gets one access-log line.
    public var access: Bool

    /// Creates logging settings; the defaults are those of the embedded configuration.
    public init(level: LogLevel = .info, format: LogFormat = .auto, access: Bool = true) {
        self.level = level
        self.format = format
        self.access = access
    }
}
