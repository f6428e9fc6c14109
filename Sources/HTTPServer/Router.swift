/// How a handler answers: at once on the server thread (the fast path), or later after awaiting
/// I/O, during which the connection is suspended.
public enum Reply: Sendable {
    case now(Response)
    case later(@Sendable () async -> Response)

    /// Answers later with the response `work` returns, or with the error it throws.
    public static func awaiting(_ work: @escaping @Sendable () async throws(HTTPError) -> Response) -> Reply {
        .later {
            do throws(HTTPError) { return try await work() } catch { return error.response }
        }
    }
}

/// A request handler. It runs on a server thread and must not block: anything that waits on
/// I/O goes into `Reply.later`.
public typealias Handler = @Sendable (Request) throws(HTTPError) -> Reply

/// Routes by exact method and path. Unknown paths get 404; known paths with another method get
/// 405 with `Allow`. `HEAD` is served by the `GET` handler (the server sends no body).
public struct Router: Sendable {
    private var table: [Substring: [String: Handler]] = [:]

    public init() {}

    public mutating func add(_ method: String, _ path: String, _ handler: @escaping Handler) {
        table[Substring(path), default: [:]][method] = handler
    }

    /// Every registered route, sorted, for documentation checks.
    public var routes: [(method: String, path: String)] {
        table.flatMap { path, methods in methods.keys.map { (method: $0, path: String(path)) } }
            .sorted { ($0.path, $0.method) < ($1.path, $1.method) }
    }

    public enum Match {
        case found(Handler)
        case methodNotAllowed(allowed: [String])
        case notFound
    }

    public func match(method: String, path: Substring) -> Match {
        guard let methods = table[path] else { return .notFound }
        if let handler = methods[method] ?? (method == "HEAD" ? methods["GET"] : nil) {
            return .found(handler)
        }
        var allowed = methods.keys.sorted()
        if methods["GET"] != nil { allowed.append("HEAD") }
        return .methodNotAllowed(allowed: allowed)
    }

    /// Routes and runs `request`, turning routing failures and thrown errors into responses.
    public func reply(to request: Request) -> Reply {
        switch match(method: request.method, path: request.path) {
        case .found(let handler):
            do { return try handler(request) } catch { return .now(error.response) }
        case .methodNotAllowed(let allowed):
            return .now(HTTPError.methodNotAllowed(request.method, allowed: allowed).response)
        case .notFound:
            return .now(HTTPError.notFound.response)
        }
    }

    /// The route label for metrics: the path when it is a route, a fixed word otherwise (so that
    /// random paths cannot explode metric cardinality).
    public func label(for path: Substring) -> String {
        table[path] != nil ? String(path) : "unmatched"
    }
}
