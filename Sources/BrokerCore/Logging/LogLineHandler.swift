public import Logging
import WireValues

/// A swift-log handler that writes one line per event to standard output: a JSON object (for
/// log collectors) or, on a terminal, a line a person reads. Numbers (metadata given as
/// `.stringConvertible(someInt)`) are JSON numbers and lists JSON arrays, so that log tools can
/// compare and sum them; in the text format, control characters are escaped (``TextLine``), so
/// that no value — a subject, a path — can start a line of its own or move the terminal's
/// cursor.
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
            line = Array("\(Timestamp.now()) \(event.level.rawValue.uppercased()) ".utf8)
            TextLine.append(event.message.description.utf8, to: &line)
            for key in keys {
                line.append(UInt8(ascii: " "))
                TextLine.append(key.utf8, to: &line)
                line.append(UInt8(ascii: "="))
                TextLine.append(Self.text(merged[key]!).utf8, to: &line)
            }
        }
        line.append(UInt8(ascii: "\n"))
        output.write(line, kind: event.message.description == AuditTrail.message ? .audit : .event)
    }

    /// A value as the text format shows it: a string or a number as itself, a list or a map as
    /// the JSON format writes it (swift-log's own description is Swift's, quotes and all).
    private static func text(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let text): text
        case .stringConvertible(let convertible): convertible.description
        case .array, .dictionary: String(decoding: json(value).serialized(), as: UTF8.self)
        }
    }

    private static func json(_ value: Logger.Metadata.Value) -> JSONValue {
        switch value {
        case .string(let text): .string(text)
        case .stringConvertible(let convertible): number(convertible) ?? .string(convertible.description)
        case .array(let values): .array(values.map(json))
        case .dictionary(let values): .object(values.keys.sorted().map { ($0, json(values[$0]!)) })
        }
    }

    /// A number or a truth value as itself.
    private static func number(_ value: any CustomStringConvertible & Sendable) -> JSONValue? {
        switch value {
        case let value as Int: .int(value)
        case let value as Double: value.isFinite ? .double(value) : nil
        case let value as Bool: .bool(value)
        default: nil
        }
    }
}

/// Text as a line of the text format writes it: control characters (a newline, an escape
/// sequence) and the backslash escaped, `\n`, `\t`, `\r`, `\\` or `\xNN`.
enum TextLine {
    static func append(_ text: some Sequence<UInt8>, to line: inout [UInt8]) {
        for byte in text {
            switch byte {
            case UInt8(ascii: "\n"): line.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case UInt8(ascii: "\t"): line.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case UInt8(ascii: "\r"): line.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case UInt8(ascii: "\\"): line.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0..<0x20, 0x7F:
                let digits = Array("0123456789abcdef".utf8)
                line.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "x"), digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
            default: line.append(byte)
            }
        }
    }
}
