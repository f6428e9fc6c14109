/// Dotted path of a configuration key, built while walking the document.
struct ConfigKeyPath: Sendable, Equatable, CustomStringConvertible {
    /// The rendered path, such as `providers.corp.client_id`; empty for the document root.
    let description: String

    /// The document root.
    static let root = ConfigKeyPath(description: "")

    /// The path of a key inside this mapping.
    func child(_ key: String) -> ConfigKeyPath {
        ConfigKeyPath(description: description.isEmpty ? key : "\(description).\(key)")
    }

    /// The path of an element inside this sequence.
    func index(_ index: Int) -> ConfigKeyPath {
        ConfigKeyPath(description: "\(description)[\(index)]")
    }
}
