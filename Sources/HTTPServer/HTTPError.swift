public import WireValues

/// An error that is also an HTTP answer: its status, the JSON error body of the API
/// (`{"error", "error_description"}`) and any headers the status calls for.
///
/// `description` is meant for people and must never contain a secret, token or code: it goes
/// into the response body and the logs.
public struct HTTPError: Error, Sendable, CustomStringConvertible {
    public let status: Int
    /// The machine-readable `error` code (OAuth codes where they apply).
    public let code: String
    /// The human sentence sent as `error_description`.
    public let description: String
    public var headers: [HTTPHeader]
    /// Close the connection after answering (for requests whose rest is not read).
    public var closeConnection: Bool

    public init(status: Int, code: String, description: String, headers: [HTTPHeader] = [], closeConnection: Bool = false) {
        self.status = status
        self.code = code
        self.description = description
        self.headers = headers
        self.closeConnection = closeConnection
    }

    /// The error as the response the client gets.
    public var response: Response {
        var response = Response.json(
            .object([("error", .string(code)), ("error_description", .string(description))]),
            status: status,
            headers: headers
        )
        response.closeConnection = closeConnection
        return response
    }

    public static func badRequest(_ description: String, code: String = "invalid_request") -> HTTPError {
        HTTPError(status: 400, code: code, description: description)
    }

    /// 400 for a query string or form body that does not parse.
    public init(_ error: FormFieldsError) {
        self.init(status: 400, code: "invalid_request", description: error.description)
    }

    /// A parameter given twice (RFC 6749 §3.1), in a form or as a JSON key; not named, as the
    /// name came from the client.
    public static let repeatedParameter = HTTPError(FormFieldsError.repeatedParameter)

    /// The path is not echoed: whatever a client put in it stays out of the answer.
    public static let notFound = HTTPError(status: 404, code: "not_found", description: "There is no endpoint at this path.")

    /// The request's method is not repeated: whatever a client sent as one stays out of the answer.
    public static func methodNotAllowed(allowed: [String]) -> HTTPError {
        HTTPError(
            status: 405,
            code: "method_not_allowed",
            description: "This method is not allowed here; use \(allowed.joined(separator: " or ")).",
            headers: [HTTPHeader("Allow", allowed.joined(separator: ", "))]
        )
    }

    public static func payloadTooLarge(limit: Int) -> HTTPError {
        HTTPError(
            status: 413,
            code: "payload_too_large",
            description: "The request body is larger than the limit of \(limit) bytes.",
            closeConnection: true
        )
    }

    /// 400 (or 501 for a transfer coding the server does not implement) for a request whose head
    /// the server refuses to read a body after: the connection closes (RFC 9112 §6.3).
    public static func malformedRequest(status: Int, _ description: String) -> HTTPError {
        HTTPError(status: status, code: "invalid_request", description: description, closeConnection: true)
    }

    public static func uriTooLong(limit: Int) -> HTTPError {
        HTTPError(status: 414, code: "uri_too_long", description: "The request target is longer than the limit of \(limit) bytes.")
    }

    public static func headersTooLarge(limit: Int) -> HTTPError {
        HTTPError(
            status: 431,
            code: "header_too_large",
            description: "The request headers are larger than the limit of \(limit) bytes."
        )
    }

    public static func unsupportedMediaType(_ description: String) -> HTTPError {
        HTTPError(status: 415, code: "unsupported_media_type", description: description)
    }

    public static func serviceUnavailable(_ code: String, _ description: String, retryAfterSeconds: Int? = nil) -> HTTPError {
        HTTPError(
            status: 503,
            code: code,
            description: description,
            headers: retryAfterSeconds.map { [HTTPHeader("Retry-After", String($0))] } ?? [],
            closeConnection: true
        )
    }
}
