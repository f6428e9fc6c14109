internal import Foundation
internal import MHDShim
public import WireValues

/// One HTTP request, as a handler sees it.
///
/// A request is only valid during the synchronous part of its handler: a handler that answers
/// later reads what it needs first and captures those values, not the request (which is
/// deliberately not `Sendable`).
public struct Request {
    public let method: String
    /// The path, without the query string, exactly as sent (not percent-decoded).
    public let path: Substring
    /// The raw query string (after `?`), if any.
    public let rawQuery: Substring?
    /// The request id: the client's `X-Request-Id` when it is safe, or one the server made.
    public let id: String
    /// The client's IP address, as text.
    public let clientIP: String
    public let body: [UInt8]
    /// The route that took the request: its registered path, or a prefix route's template (such
    /// as `/proxy/dev/{path}`); `unmatched` before routing. Never the path as sent: a closed set,
    /// fit for metrics labels. Set by the ``Router``.
    public internal(set) var route = "unmatched"
    /// The caller's `traceparent`, when it is a valid one: read once, for the access log and the
    /// calls made for the request.
    let traceparent: String?
    private let headers: HeaderSource

    enum HeaderSource {
        case shim(ShimRequest)
        case fixed([String: String])
    }

    /// The request's id and the caller's trace, as the calls made for it pass them on.
    public var trace: TraceContext {
        TraceContext(requestID: id, traceparent: traceparent, tracestate: traceparent == nil ? nil : header("tracestate"))
    }

    init(method: String, target: String, id: String, clientIP: String, body: [UInt8], headers: HeaderSource, traceparent: String?) {
        self.method = method
        // By UTF-8 byte: `?` is ASCII, and Character-wise searching costs more than the request.
        let split = target.utf8.firstIndex(of: UInt8(ascii: "?"))
        path = target[..<(split ?? target.endIndex)]
        rawQuery = split.map { target[target.utf8.index(after: $0)...] }
        self.id = id
        self.clientIP = clientIP
        self.body = body
        self.headers = headers
        self.traceparent = traceparent
    }

    /// A request built in memory, for testing handlers without a socket.
    public init(
        method: String,
        target: String,
        headers: [String: String] = [:],
        body: [UInt8] = [],
        clientIP: String = "127.0.0.1",
        id: String = "test"
    ) {
        let lowercased = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { $1 })
        self.init(method: method, target: target, id: id, clientIP: clientIP, body: body, headers: .fixed(lowercased),
                  traceparent: TraceContext.traceparent(lowercased["traceparent"]))
    }

    /// A request header, by case-insensitive name.
    public func header(_ name: String) -> String? {
        withHeaderBytes(name) { $0.map { String(decoding: $0, as: UTF8.self) } }
    }

    /// Every value of a request header (case-insensitive name), joined by ", " as a list given in
    /// several fields reads (RFC 9110 §5.3); nil when there is none.
    public func joinedHeader(_ name: String) -> String? {
        switch headers {
        case .shim(let shim): ServerCore.joinedHeader(name, of: shim.pointer)
        case .fixed(let values): values[name.lowercased()]
        }
    }

    /// Runs `body` with the bytes of a request header (case-insensitive name), or nil when
    /// there is none, without making a `String` of it: for headers read on every request.
    public func withHeaderBytes<T, E: Error>(_ name: String, _ body: (UnsafeRawBufferPointer?) throws(E) -> T) throws(E) -> T {
        switch headers {
        case .shim(let shim):
            guard let value = name.withCString({ tb_request_header(shim.pointer, $0) }) else { return try body(nil) }
            return try body(UnsafeRawBufferPointer(start: value, count: strlen(value)))
        case .fixed(let values):
            guard var value = values[name.lowercased()] else { return try body(nil) }
            return try value.withUTF8 { utf8 in Result { () throws(E) in try body(UnsafeRawBufferPointer(utf8)) } }.get()
        }
    }

    /// The query string's parameters.
    public func query() throws(HTTPError) -> FormFields {
        guard let rawQuery else { return FormFields() }
        do { return try FormFields(parsing: rawQuery) } catch { throw HTTPError(error) }
    }

    /// The body's parameters: an `application/x-www-form-urlencoded` body, or a JSON object whose
    /// values are strings (accepted for clients that find JSON easier).
    public func form() throws(HTTPError) -> FormFields {
        let mediaType = header("Content-Type")?
            .split(separator: ";", maxSplits: 1).first?
            .trimmingCharacters(in: .whitespaces).lowercased()
        switch mediaType {
        case "application/x-www-form-urlencoded":
            guard let text = String(validating: body, as: UTF8.self) else {
                throw .badRequest("The form body is not UTF-8 text.")
            }
            do { return try FormFields(parsing: text) } catch { throw HTTPError(error) }
        case "application/json":
            return try jsonForm()
        case nil where body.isEmpty:
            return FormFields()
        default:
            throw .unsupportedMediaType("Send the parameters as application/x-www-form-urlencoded (or a JSON object of strings).")
        }
    }

    /// A JSON object of strings, held to the rules of a form body: a key given twice is the same
    /// 400 as a repeated form parameter, and no error repeats a key.
    private func jsonForm() throws(HTTPError) -> FormFields {
        guard let document = try? JSONValue.parse(body), case .object(let members) = document else {
            throw .badRequest("The body is not a JSON object.")
        }
        guard JSONMemberCount.of(body) == members.count else { throw .repeatedParameter }
        var pairs: [(String, String)] = []
        for (name, value) in members {
            guard case .string(let text) = value else {
                throw .badRequest("Every parameter of a JSON body must be a string.")
            }
            // `\u0000` is valid JSON; a form's `%00` is refused, and so is this.
            guard !name.utf8.contains(0), !text.utf8.contains(0) else {
                throw .badRequest("A parameter of the JSON body contains a NUL character.")
            }
            pairs.append((name, text))
        }
        return FormFields(pairs)
    }
}

@available(*, unavailable, message: "A request is only valid inside its handler; capture the values it carries.")
extension Request: Sendable {}

/// The shim's handle of a request. libmicrohttpd keeps the request alive until both it and the
/// server have released it, and the only call made from other threads (tb_request_complete)
/// is thread-safe, so the handle may cross threads.
struct ShimRequest: @unchecked Sendable {
    let pointer: OpaquePointer
}
