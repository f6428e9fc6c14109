/// Why a query string or form body could not be parsed (`FormFields(parsing:)`). `description`
/// is a sentence for the client; it never repeats a value or a name the client sent.
public struct FormFieldsError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }

    /// A parameter given twice (RFC 6749 §3.1); not named, as the name came from the client.
    public static let repeatedParameter = FormFieldsError("A parameter appears more than once.")
}
