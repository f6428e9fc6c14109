/// What the server reports about each request, for metrics and the access log.
///
/// Methods are called on server threads (or, for deferred requests, the thread that finished
/// them), so implementations must be thread-safe and fast.
public protocol RequestObserver: Sendable {
    /// A request was answered.
    func requestFinished(_ record: RequestRecord)
    /// libmicrohttpd reported something (`fromLibrary`: most of its messages are its word on a
    /// malformed request, which any client can send), or the server did (its request watchdog).
    func serverMessage(_ message: String, fromLibrary: Bool)
}

/// The facts about one answered request. It never holds the query string or the body: those
/// may carry codes and tokens.
public struct RequestRecord: Sendable {
    public var method: String
    /// The route (a registered path) or `unmatched`.
    public var route: String
    public var path: String
    public var status: Int
    public var seconds: Double
    public var requestID: String
    public var clientIP: String
    /// The connection's address when it is not the client's: the trusted proxy that named the
    /// client in `X-Forwarded-For`.
    public var proxyIP: String?
    public var responseBytes: Int
    /// The trace id of the caller's `traceparent`, when it sent one.
    public var traceID: Substring?
}
