/// The rule for provider and app ids: `^[a-z0-9][a-z0-9_-]{0,63}$`.
enum ConfigIdentifier {
    /// Checks an id, answering why it is refused.
    static func validate(_ id: String) -> Result<String, ConfigValueError> {
        let scalars = Array(id.unicodeScalars)
        func isLowerAlphanumeric(_ scalar: Unicode.Scalar) -> Bool {
            ("a"..."z").contains(scalar) || ("0"..."9").contains(scalar)
        }
        guard let first = scalars.first, scalars.count <= 64, isLowerAlphanumeric(first),
              scalars.allSatisfy({ isLowerAlphanumeric($0) || $0 == "_" || $0 == "-" }) else {
            return .failure(ConfigValueError("invalid id \(ConfigValueParsing.quoted(id)): ids are 1 to 64 characters "
                + "of a-z, 0-9, _ and -, starting with a letter or digit"))
        }
        return .success(id)
    }
}
