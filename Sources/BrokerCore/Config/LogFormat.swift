/// How log lines are written.
public enum LogFormat: String, Sendable, Hashable, CaseIterable {
    /// JSON lines, unless standard output is a terminal, when text.
    case auto
    /// One JSON object per line.
    case json
    /// Human-readable text.
    case text

    /// `.json` or `.text`: `.auto` becomes `.text` on a terminal and `.json` elsewhere.
    public func resolved(stdoutIsTerminal: Bool) -> LogFormat {
        guard self == .auto else { return self }
        return stdoutIsTerminal ? .text : .json
    }
}
