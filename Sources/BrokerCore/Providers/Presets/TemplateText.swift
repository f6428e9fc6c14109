/// Text with `{name}` placeholders, as used by endpoint templates (`{tenant}`) and picture
/// templates (`{id}`).
enum TemplateText {
    /// The placeholder names in `template`, in order of appearance.
    static func placeholders(in template: String) -> [String] {
        var names: [String] = []
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{") {
            let afterOpen = rest.index(after: open)
            guard let close = rest[afterOpen...].firstIndex(of: "}") else { break }
            names.append(String(rest[afterOpen..<close]))
            rest = rest[rest.index(after: close)...]
        }
        return names
    }

    /// `template` with every `{name}` replaced by `value(name)`; `nil` as soon as one has no value.
    static func render(_ template: String, _ value: (String) -> String?) -> String? {
        var output = ""
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{") {
            let afterOpen = rest.index(after: open)
            guard let close = rest[afterOpen...].firstIndex(of: "}") else { break }
            guard let replacement = value(String(rest[afterOpen..<close])) else { return nil }
            output += rest[..<open]
            output += replacement
            rest = rest[rest.index(after: close)...]
        }
        return output + rest
    }
}
