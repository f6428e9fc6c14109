import Foundation

/// Turns the text of a setting, from a YAML scalar or an environment variable, into a typed
/// value. Both sources go through these functions so that they accept the same spellings and
/// give the same messages.
enum ConfigValueParsing {
    /// A value quoted for a message, shortened when long.
    static func quoted(_ text: String) -> String {
        let shown = text.count > 60 ? String(text.prefix(57)) + "..." : text
        let escaped = shown.replacingOccurrences(of: "\\", with: "\\\\")
            .replacingOccurrences(of: "\"", with: "\\\"")
        return "\"\(escaped)\""
    }

    /// A decimal integer within `range`.
    static func integer(_ text: String, in range: ClosedRange<Int>) -> Result<Int, ConfigValueError> {
        guard let value = Int(text.trimmingCharacters(in: .whitespaces)) else {
            return .failure(ConfigValueError("expected an integer, got \(quoted(text))"))
        }
        guard range.contains(value) else {
            return .failure(ConfigValueError(
                "must be between \(range.lowerBound) and \(range.upperBound), got \(value)"))
        }
        return .success(value)
    }

    /// A finite number (integer or decimal) within `range`.
    static func number(_ text: String, in range: ClosedRange<Double>) -> Result<Double, ConfigValueError> {
        guard let value = Double(text.trimmingCharacters(in: .whitespaces)), value.isFinite else {
            return .failure(ConfigValueError("expected a number, got \(quoted(text))"))
        }
        guard range.contains(value) else {
            return .failure(ConfigValueError(
                "must be between \(format(range.lowerBound)) and \(format(range.upperBound)), got \(format(value))"))
        }
        return .success(value)
    }

    /// `true`/`false`, also `yes`/`no`, `on`/`off` and `1`/`0`, in any case.
    static func boolean(_ text: String) -> Result<Bool, ConfigValueError> {
        switch text.trimmingCharacters(in: .whitespaces).lowercased() {
        case "true", "yes", "on", "1": return .success(true)
        case "false", "no", "off", "0": return .success(false)
        default: return .failure(ConfigValueError("expected true or false, got \(quoted(text))"))
        }
    }

    /// One of the raw values of `T`, compared exactly.
    static func choice<T: RawRepresentable & CaseIterable>(_ text: String, as type: T.Type) -> Result<T, ConfigValueError>
    where T.RawValue == String {
        choice(text, among: Array(T.allCases))
    }

    /// One of `values`, by its raw value.
    static func choice<T: RawRepresentable>(_ text: String, among values: [T]) -> Result<T, ConfigValueError> where T.RawValue == String {
        if let value = values.first(where: { $0.rawValue == text }) { return .success(value) }
        let names = values.map(\.rawValue)
        let hint = KeySuggestion.hint(for: text, in: names)
        return .failure(ConfigValueError(
            "expected one of \(names.joined(separator: ", ")), got \(quoted(text))\(hint)"))
    }

    /// A number as messages show it: without a fractional part when it has none.
    static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }
}
