internal import Foundation

/// A JSON document. Objects keep their keys in order, so responses read the way the API
/// documents them.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.int(let a), .int(let b)): a == b
        case (.double(let a), .double(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a.elementsEqual(b) { $0.0 == $1.0 && $0.1 == $1.1 }
        default: false
        }
    }

    /// The value of `key` when this is an object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    /// A string value, when this is one.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// Compact UTF-8 JSON.
    public func serialized() -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(128)
        write(to: &output)
        return output
    }

    private func write(to output: inout [UInt8]) {
        switch self {
        case .null: output.append(contentsOf: "null".utf8)
        case .bool(let value): output.append(contentsOf: (value ? "true" : "false").utf8)
        case .int(let value): output.append(decimal: value)
        case .double(let value):
            output.append(contentsOf: (value.isFinite ? String(value) : "null").utf8)
        case .string(let value): Self.writeString(value, to: &output)
        case .array(let values):
            output.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                value.write(to: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            for (index, (key, value)) in members.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                Self.writeString(key, to: &output)
                output.append(UInt8(ascii: ":"))
                value.write(to: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// Appends `string` as a JSON string literal (quoted and escaped), for code that writes JSON
    /// directly on hot paths.
    public static func appendString(_ string: String, to output: inout [UInt8]) {
        writeString(string, to: &output)
    }

    /// Appends UTF-8 bytes as a JSON string literal (quoted and escaped): for text kept as bytes.
    public static func appendString(utf8: UnsafeBufferPointer<UInt8>, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        appendContent(utf8: utf8, to: &output)
        output.append(UInt8(ascii: "\""))
    }

    /// Appends the strings of `parts` joined by `separator` as one JSON string literal, without
    /// joining them first (hot paths).
    public static func appendString(joining parts: [String], separator: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        for (index, part) in parts.enumerated() {
            if index > 0 { appendContent(separator, to: &output) }
            appendContent(part, to: &output)
        }
        output.append(UInt8(ascii: "\""))
    }

    private static func writeString(_ string: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        appendContent(string, to: &output)
        output.append(UInt8(ascii: "\""))
    }

    /// `string` escaped for the inside of a JSON string literal.
    private static func appendContent(_ string: String, to output: inout [UInt8]) {
        // A native string lends its UTF-8 in place (no copy, no retain); others are copied.
        if string.utf8.withContiguousStorageIfAvailable({ appendContent(utf8: $0, to: &output) }) == nil {
            Array(string.utf8).withUnsafeBufferPointer { appendContent(utf8: $0, to: &output) }
        }
    }

    private static func appendContent(utf8: UnsafeBufferPointer<UInt8>, to output: inout [UInt8]) {
        // Most strings (tokens, ids, paths) need no escaping: copy them whole.
        let plain = utf8.allSatisfy { byte in
            byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\")
                && byte != UInt8(ascii: "<") && byte != UInt8(ascii: ">") && byte != UInt8(ascii: "&")
        }
        if plain {
            output.append(contentsOf: utf8)
        } else {
            writeEscaped(utf8, to: &output)
        }
    }

    private static func writeEscaped(_ utf8: UnsafeBufferPointer<UInt8>, to output: inout [UInt8]) {
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "\""): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case UInt8(ascii: "\n"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case UInt8(ascii: "\r"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case UInt8(ascii: "\t"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20, UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "&"):
                // Control characters must be escaped; <, > and & are escaped too so that JSON
                // can never be read as markup by a confused browser.
                output.append(contentsOf: Array("\\u00".utf8))
                output.append(hexDigits[Int(byte >> 4)])
                output.append(hexDigits[Int(byte & 0x0F)])
            default: output.append(byte)
            }
        }
    }
}

extension JSONValue: Decodable {
    /// Parses a JSON document.
    public static func parse(_ bytes: [UInt8]) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: Data(bytes))
    }

    public init(from decoder: any Decoder) throws {
        if var array = try? decoder.unkeyedContainer() {
            var values: [JSONValue] = []
            while !array.isAtEnd { values.append(try array.decode(JSONValue.self)) }
            self = .array(values)
            return
        }
        if let object = try? decoder.container(keyedBy: AnyKey.self) {
            self = .object(try object.allKeys.sorted { $0.stringValue < $1.stringValue }.map {
                ($0.stringValue, try object.decode(JSONValue.self, forKey: $0))
            })
            return
        }
        let single = try decoder.singleValueContainer()
        if single.decodeNil() {
            self = .null
        } else if let value = try? single.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? single.decode(Int.self) {
            self = .int(value)
        } else if let value = try? single.decode(Double.self) {
            self = .double(value)
        } else {
            self = .string(try single.decode(String.self))
        }
    }

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}
