/// Parameters from a query string or an `application/x-www-form-urlencoded` body.
///
/// Parsing follows the URL Standard's urlencoded parser with two deliberate refusals, because
/// OAuth parameters are security decisions: a repeated name is an error (RFC 6749 §3.1: "request
/// and response parameters MUST NOT be included more than once"), and so is a malformed
/// percent-escape or a value that is not UTF-8. Error messages echo neither a value (values may
/// be codes or tokens) nor a name the client sent: only names the broker itself asks for.
/// (`required` and `optional`, which answer a client, are the HTTP layer's: `FormFields+Required`.)
public struct FormFields: Sendable, Equatable {
    private var values: [String: String]

    /// Names in the order they appeared.
    public private(set) var names: [String]

    public init(_ pairs: [(String, String)] = []) {
        values = [:]
        names = []
        for (name, value) in pairs where values.updateValue(value, forKey: name) == nil {
            names.append(name)
        }
    }

    /// Parses `a=1&b=x+y%21`. `+` decodes to a space, as both query strings built by HTML forms
    /// and form bodies use it.
    public init(parsing encoded: some StringProtocol) throws(FormFieldsError) {
        self.init()
        for segment in Substring(encoded).utf8.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let equals = segment.firstIndex(of: UInt8(ascii: "="))
            let rawName = segment[..<(equals ?? segment.endIndex)]
            let rawValue = equals.map { segment[segment.index(after: $0)...] } ?? segment[segment.endIndex...]
            let name = try Self.decode(rawName, describing: "a parameter name")
            guard !name.isEmpty else {
                throw FormFieldsError("A parameter has an empty name.")
            }
            let value = try Self.decode(rawValue, describing: "a parameter value")
            guard values.updateValue(value, forKey: name) == nil else { throw .repeatedParameter }
            names.append(name)
        }
    }

    public subscript(name: String) -> String? { values[name] }

    /// Percent-decodes one form-encoded component (and `+` as space), such as the client id of
    /// HTTP Basic client authentication (RFC 6749 §2.3.1).
    public static func unescape(_ text: String) throws(FormFieldsError) -> String {
        try decode(Substring(text).utf8, describing: "a form-encoded value")
    }

    /// Percent-decodes `bytes` (and `+` as space) into UTF-8 text.
    static func decode(_ bytes: Substring.UTF8View, describing what: String) throws(FormFieldsError) -> String {
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "+"):
                output.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                let first = bytes.index(after: index)
                guard first < bytes.endIndex, bytes.index(after: first) < bytes.endIndex,
                      let high = bytes[first].hexDigitValue, let low = bytes[bytes.index(after: first)].hexDigitValue
                else {
                    throw FormFieldsError("Malformed percent-encoding in \(what).")
                }
                output.append(high << 4 | low)
                index = bytes.index(after: first)
            default:
                output.append(byte)
            }
            index = bytes.index(after: index)
        }
        let subject = what.prefix(1).uppercased() + what.dropFirst()
        guard !output.contains(0) else { throw FormFieldsError("\(subject) contains a NUL character.") }
        guard let text = String(validating: output, as: UTF8.self) else { throw FormFieldsError("\(subject) is not valid UTF-8 text.") }
        return text
    }
}

extension FormFields {
    /// Serialises pairs as `application/x-www-form-urlencoded` (also right for query strings):
    /// everything but `[A-Za-z0-9*._-]` is percent-encoded, spaces as `+`.
    public static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { escape($0.0) + "=" + escape($0.1) }.joined(separator: "&")
    }

    /// `url` with `pairs` added to its query: after `?`, or after `&` when it has a query already.
    public static func url(_ url: String, adding pairs: [(String, String)]) -> String {
        url + (url.contains("?") ? "&" : "?") + encode(pairs)
    }

    /// One form-encoded component (see `encode`).
    public static func escape(_ text: String) -> String {
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count)
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "*"), UInt8(ascii: "."),
                 UInt8(ascii: "_"), UInt8(ascii: "-"):
                output.append(byte)
            case UInt8(ascii: " "):
                output.append(UInt8(ascii: "+"))
            default:
                output += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: output, as: UTF8.self)
    }
}
