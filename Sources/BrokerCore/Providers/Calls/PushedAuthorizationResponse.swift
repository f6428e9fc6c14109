import WireValues

/// A pushed authorization request endpoint's answer (RFC 9126 §2.2): the `request_uri` the
/// browser carries to the authorization endpoint instead of the request's parameters.
struct PushedAuthorizationResponse: Sendable {
    let requestURI: String

    /// Parses the answer: 201 (or 200) with a `request_uri`, else an OAuth error (RFC 9126 §2.3).
    static func parse(_ body: [UInt8], status: Int) throws(ProviderCallError) -> PushedAuthorizationResponse {
        guard let json = try? JSONValue.parse(body), case .object = json else {
            throw .badResponse("the pushed authorization response (HTTP \(status)) is not a JSON object")
        }
        if let error = json["error"]?.stringValue, !error.isEmpty {
            throw .oauth(code: error, description: json["error_description"]?.stringValue, status: status)
        }
        guard status == 201 || status == 200 else {
            throw .badResponse("the pushed authorization request endpoint answered HTTP \(status)")
        }
        // RFC 9126 §2.2: a URI; the broker passes it on as the provider made it, bounded.
        guard let requestURI = json["request_uri"]?.stringValue, !requestURI.isEmpty, requestURI.utf8.count <= 2048 else {
            throw .badResponse("the pushed authorization response has no usable request_uri")
        }
        return PushedAuthorizationResponse(requestURI: requestURI)
    }
}
