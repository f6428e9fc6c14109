/// A value a preset's endpoint templates need from the configuration, such as Microsoft's
/// `{tenant}`. The configuration key has the placeholder's name (`tenant: contoso.onmicrosoft.com`).
public struct PresetPlaceholder: Sendable, Equatable {
    /// The name, both the `{name}` in templates and the configuration key.
    public let name: String
    /// The value used when the configuration leaves the key out; `nil` makes the key required.
    public let defaultValue: String?
    /// What the value is, for error messages.
    public let description: String

    /// Creates a placeholder.
    public init(name: String, defaultValue: String?, description: String) {
        self.name = name
        self.defaultValue = defaultValue
        self.description = description
    }

    /// Whether `value` can be put in a URL path as it is: 1 to 128 characters of letters, digits,
    /// `-`, `_` and `.` (tenant names, GUIDs and domain names all fit).
    public static func isValidValue(_ value: String) -> Bool {
        !value.isEmpty && value.count <= 128 && value != "." && value != ".." && value.unicodeScalars.allSatisfy {
            $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_.".unicodeScalars.contains($0))
        }
    }

    /// `template` with `{name}` placeholders filled from `values`; `nil` when one has no value.
    public static func fill(_ template: String, with values: [String: String]) -> String? {
        TemplateText.render(template) { values[$0] }
    }
}
