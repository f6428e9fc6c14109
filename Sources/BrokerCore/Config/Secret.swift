/// A secret read from the environment or a file, such as a provider's client secret.
///
/// Every way of printing it (`description`, `debugDescription`, string interpolation, `dump`,
/// the default printing of a struct that holds it) shows only where it came from:
/// `Secret(<redacted>, from env CORP_CLIENT_SECRET)`. Only ``reveal()`` gives the value, and
/// only the code that sends it to a provider should call it.
public struct Secret: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private let value: String
    /// Where the secret came from, e.g. `env CORP_CLIENT_SECRET` or `file /run/secrets/corp`.
    public let source: String
    /// The file it was read from, for the start's warning when others can read it.
    public let file: String?

    /// Wraps `value`, remembering where it came from for messages (and its `file`, if any).
    public init(_ value: String, source: String, file: String? = nil) {
        self.value = value
        self.source = source
        self.file = file
    }

    /// The secret itself. Never log or print the result.
    public func reveal() -> String { value }

    /// `Secret(<redacted>, from SOURCE)`.
    public var description: String { "Secret(<redacted>, from \(source))" }

    /// The same as ``description``: the value is never shown.
    public var debugDescription: String { description }

    /// A mirror with no children, so that `dump` and reflection cannot reach the value.
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
