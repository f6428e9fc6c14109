public import WireValues

/// Reading the parameters a request must or may carry: a missing or empty one is the client's
/// 400.
extension FormFields {
    /// The value of `name`, which must be present and non-empty.
    public func required(_ name: String) throws(HTTPError) -> String {
        guard let value = self[name], !value.isEmpty else {
            throw .badRequest("Missing required parameter \(name).")
        }
        return value
    }

    /// The value of `name`, or nil when absent; present but empty is an error.
    public func optional(_ name: String) throws(HTTPError) -> String? {
        guard let value = self[name] else { return nil }
        guard !value.isEmpty else { throw .badRequest("Parameter \(name) is empty.") }
        return value
    }
}
