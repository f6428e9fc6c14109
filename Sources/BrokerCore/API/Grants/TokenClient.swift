import HTTPServer

/// The client a token request names, as its endpoint reads it: `app` or `client_id` at the
/// broker's `POST /token`; `client_id` or HTTP Basic at the standard endpoint.
struct TokenClient: Sendable {
    let id: String?
    /// The parameter that names it, for the error when a grant needs it and it is missing.
    let parameter: String

    /// The client, which the grant needs named.
    func required() throws(HTTPError) -> String {
        guard let id else { throw .badRequest("Missing required parameter \(parameter).") }
        return id
    }
}
