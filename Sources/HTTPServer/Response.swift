public import WireValues

/// One HTTP header line of a response.
public struct HTTPHeader: Sendable, Equatable {
    public var name: String
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// An HTTP response as the application builds it. The server adds, when it sends it,
/// `X-Request-Id`, `X-Content-Type-Options: nosniff` and, unless the response sets its own,
/// `Cache-Control: no-store` (answers of the broker carry tokens or describe sessions, so none
/// may be cached by default).
public struct Response: Sendable {
    public var status: Int
    public var headers: [HTTPHeader]
    public var body: [UInt8]
    /// Ask the server to close the connection after this response.
    public var closeConnection: Bool
    /// A body written while it is sent, instead of `body`.
    public var stream: ResponseStream?
    /// For an answer to `HEAD` made without its body (the API proxy's): the length a `GET`'s body
    /// would have had, announced in `Content-Length` instead of `body`'s.
    public var headLength: UInt64?

    public init(status: Int, headers: [HTTPHeader] = [], body: [UInt8] = [], closeConnection: Bool = false,
                stream: ResponseStream? = nil, headLength: UInt64? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.closeConnection = closeConnection
        self.stream = stream
        self.headLength = headLength
    }

    /// A JSON response.
    public static func json(_ value: JSONValue, status: Int = 200, headers: [HTTPHeader] = []) -> Response {
        Response(status: status, headers: jsonHeaders + headers, body: value.serialized())
    }

    /// A 200 JSON response whose body is already serialised.
    public static func json(serialized body: [UInt8]) -> Response {
        Response(status: 200, headers: jsonHeaders, body: body)
    }

    /// Shared by every JSON response: the array is retained, not built, per response.
    private static let jsonHeaders = [HTTPHeader("Content-Type", "application/json")]

    /// A redirect (the server adds `Referrer-Policy: no-referrer`, as to every answer).
    public static func redirect(to location: String) -> Response {
        Response(status: 302, headers: [HTTPHeader("Location", location)])
    }

    /// The first value of a header, case-insensitively (ASCII), without allocating: the server
    /// asks on every response.
    public func header(_ name: String) -> String? {
        headers.first { HeaderName.same($0.name.utf8, name.utf8) }?.value
    }
}
