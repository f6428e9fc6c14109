public import Logging
import WireValues

/// A swift-log handler that writes one line per event to standard output: a JSON object (for
/// log collectors) or, on a terminal, a line a person reads.
///
/// Nothing here filters secrets: the rule is that no secret, token or code is ever passed to a
/// logger. Tests search the logs for every secret of a full run.
public struct LogLineHandler: LogHandler {
    public enum Style: Sendable {
        case json
        case text
    }

    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let style: Style
    private let output: LogOutput

    public init(label: String, level: Logger.Level, style: Style, output: LogOutput = .standardOutput) {
        self.label = label
        logLevel = level
        self.style = style
        self.output = output
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        let keys = merged.keys.sorted()
        var line: [UInt8]
        switch style {
        case .json:
            var members: [(String, JSONValue)] = [
                ("ts", .string(Timestamp.now())),
                ("level", .string(event.level.rawValue)),
                ("logger", .string(label)),
                ("msg", .string(event.message.description)),
            ]
            members += keys.map { ($0, Self.json(merged[$0]!)) }
            line = JSONValue.object(members).serialized()
        case .text:
            var text = "\(Timestamp.now()) \(event.level.rawValue.uppercased()) \(event.message)"
            for key in keys { text += " \(key)=\(merged[key]!)" }
            line = Array(text.utf8)
        }
        line.append(UInt8(ascii: "\n"))
        output.write(line)
    }

    private static func json(_ value: Logger.Metadata.Value) -> JSONValue {
        switch value {
        case .string(let text): .string(text)
        case .stringConvertible(let convertible): .string(convertible.description)
        case .array(let values): .array(values.map(json))
        case .dictionary(let values): .object(values.keys.sorted().map { ($0, json(values[$0]!)) })
        }
    }
}
