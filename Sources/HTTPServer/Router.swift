public import WireValues
#if canImport(Glibc)
import Glibc
#endif

/// How a handler answers: at once on the server thread (the fast path), or deferred until some
/// I/O has been awaited, during which the connection is suspended.
public enum Reply: Sendable {
    /// Sent from the server thread that ran the handler.
    case now(Response)
    /// The connection is suspended, and `start` runs at once on the server thread: it begins
    /// the work and hands the response to its ``Answer`` once, from whatever thread the work
    /// ends on (even before `start` returns). Work that ends on a thread of its own (the API
    /// proxy's transfers) answers from there, without a task between it and the connection.
    /// A task the work starts binds `TraceContext.current` to the answer's `trace` first.
    case later(@Sendable (_ answer: Answer) -> Void)

    /// The connection is suspended while `work` runs in a task, which has the request's trace as
    /// `TraceContext.current`; its response is the answer.
    public static func deferred(_ work: @escaping @Sendable () async -> Response) -> Reply {
        .later { answer in
            TraceContext.$current.withValue(answer.trace) { _ = Task { answer(await work()) } }
        }
    }

    /// Deferred like `deferred`, for work that may throw: the response `work` returns, or the
    /// `HTTPError` it throws as its response.
    public static func deferredCatching(_ work: @escaping @Sendable () async throws(HTTPError) -> Response) -> Reply {
        .deferred {
            do throws(HTTPError) { return try await work() } catch { return error.response }
        }
    }

    /// The response, once there is one: for a reply used inside another's work.
    public func response() async -> Response {
        switch self {
        case .now(let response):
            return response
        case .later(let start):
            return await withCheckedContinuation { continuation in
                start(Answer(trace: TraceContext.current) { continuation.resume(returning: $0) })
            }
        }
    }
}

/// Where a `Reply.later` sends its response: called once, from any thread.
public struct Answer: Sendable {
    /// The request's id and its caller's trace, for the calls its work makes. Bound as a task
    /// local only by work that starts a task: a binding costs an allocation, which the proxy's
    /// answers, started and ended on threads, do without.
    public let trace: TraceContext?
    private let send: @Sendable (Response) -> Void

    public init(trace: TraceContext?, _ send: @escaping @Sendable (Response) -> Void) {
        self.trace = trace
        self.send = send
    }

    public func callAsFunction(_ response: Response) {
        send(response)
    }
}

/// A request handler. It runs on a server thread and must not block: anything that waits on
/// I/O goes into `Reply.deferred`, `Reply.deferredCatching` or `Reply.later`.
public typealias Handler = @Sendable (Request) throws(HTTPError) -> Reply

/// Routes by exact method and path, then by path prefix (`addPrefix`: a route that takes every
/// path below it). Unknown paths go to ``unmatched`` (a JSON 404 unless set); known paths with
/// another method get 405 with `Allow`. `HEAD` is served by the `GET` handler (the server sends
/// no body).
public struct Router: Sendable {
    private var table: [PathKey: Route] = [:]
    /// Prefix routes, tried in order after the exact ones.
    private var prefixes: [(prefix: String, route: Route)] = []
    /// What answers a path no route takes, whatever its method: a 404 of its own choosing, or a
    /// page at a path that is not part of the API (the route label stays `unmatched`).
    public var unmatched: Handler = { _ throws(HTTPError) in throw .notFound }

    /// A path as the table's key: hashed and compared as bytes. A `Substring` key is hashed by
    /// its normalised Unicode scalars and compared as characters — on every request.
    private struct PathKey: Hashable {
        let path: Substring

        init(_ path: Substring) {
            self.path = path
        }

        static func == (lhs: PathKey, rhs: PathKey) -> Bool {
            lhs.path.utf8.count == rhs.path.utf8.count && lhs.withBytes { left in rhs.withBytes { right in
                left.count == 0 || memcmp(left.baseAddress!, right.baseAddress!, left.count) == 0
            } }
        }

        func hash(into hasher: inout Hasher) {
            withBytes { hasher.combine(bytes: $0) }
        }

        private func withBytes<Result>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result {
            if let result = path.utf8.withContiguousStorageIfAvailable({ body(UnsafeRawBufferPointer($0)) }) { return result }
            return Array(path.utf8).withUnsafeBytes(body)
        }
    }

    /// One path and its handlers (a route has a handful of methods: a list beats a dictionary).
    private struct Route: Sendable {
        let label: String
        var handlers: [MethodHandler] = []

        func handler(for method: String) -> Handler? {
            for entry in handlers where entry.method == method { return entry.handler }
            return nil
        }
    }

    /// A struct rather than a tuple: a closure inside a tuple that is an array's element is
    /// stored in its most general form, and reading it back allocates a conversion thunk — on
    /// every request.
    private struct MethodHandler: Sendable {
        let method: String
        let handler: Handler
    }

    public init() {}

    public mutating func add(_ method: String, _ path: String, _ handler: @escaping Handler) {
        precondition(table[PathKey(Substring(path))]?.handler(for: method) == nil, "\(method) \(path) is registered twice")
        table[PathKey(Substring(path)), default: Route(label: path)].handlers.append(MethodHandler(method: method, handler: handler))
    }

    /// Registers `handler` for `method` on every path that starts with `prefix`; `label` names
    /// the route in metrics and the access log's route field.
    public mutating func addPrefix(_ method: String, _ prefix: String, label: String, _ handler: @escaping Handler) {
        if let index = prefixes.firstIndex(where: { $0.prefix == prefix }) {
            precondition(prefixes[index].route.handler(for: method) == nil, "\(method) \(prefix)… is registered twice")
            prefixes[index].route.handlers.append(MethodHandler(method: method, handler: handler))
        } else {
            var route = Route(label: label)
            route.handlers.append(MethodHandler(method: method, handler: handler))
            prefixes.append((prefix, route))
        }
    }

    /// Every registered route, sorted, for documentation checks.
    public var routes: [(method: String, path: String)] {
        (Array(table.values) + prefixes.map(\.route)).flatMap { route in route.handlers.map { (method: $0.method, path: route.label) } }
            .sorted { ($0.path, $0.method) < ($1.path, $1.method) }
    }

    /// The exact route of `path`, else the first prefix route it falls under: by bytes (a
    /// `hasPrefix` of strings compares characters, grapheme clusters, on every request).
    private func find(_ path: Substring) -> Route? {
        if let route = table[PathKey(path)] { return route }
        return prefixes.first { path.utf8.starts(with: $0.prefix.utf8) }?.route
    }

    private enum Match {
        case found(Handler)
        case methodNotAllowed(allowed: [String])
        case notFound
    }

    private func match(method: String, route: Route?) -> Match {
        guard let route else { return .notFound }
        // Not `??`: through a generic function, a closure is wrapped in a new thunk every time.
        if let handler = route.handler(for: method) { return .found(handler) }
        if method == "HEAD", let handler = route.handler(for: "GET") { return .found(handler) }
        var allowed = Set(route.handlers.map(\.method))
        if allowed.contains("GET") { allowed.insert("HEAD") } // a GET route answers HEAD too
        return .methodNotAllowed(allowed: allowed.sorted())
    }

    /// The route label of `path` (see `route`), for requests answered without routing.
    public func label(for path: Substring) -> String {
        find(path)?.label ?? "unmatched"
    }

    /// Routes and runs `request`, turning routing failures and thrown errors into responses;
    /// with the route's label for metrics: the path when it is a route, a fixed word otherwise
    /// (so that random paths cannot explode metric cardinality).
    public func route(_ request: inout Request) -> (reply: Reply, label: String) {
        let route = find(request.path)
        request.route = route?.label ?? "unmatched"
        let reply: Reply
        switch match(method: request.method, route: route) {
        case .found(let handler):
            do { reply = try handler(request) } catch { reply = .now(error.response) }
        case .methodNotAllowed(let allowed):
            reply = .now(HTTPError.methodNotAllowed(allowed: allowed).response)
        case .notFound:
            do { reply = try unmatched(request) } catch { reply = .now(error.response) }
        }
        return (reply, request.route)
    }

    /// The same for a request made in memory (`Request(method:target:)`).
    public func route(_ request: Request) -> (reply: Reply, label: String) {
        var request = request
        return route(&request)
    }
}
