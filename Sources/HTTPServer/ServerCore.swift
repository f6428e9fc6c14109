internal import MHDShim
import Synchronization
internal import WireValues

/// Where requests enter, on a server thread: limits first, then the router. A `Reply.now` is
/// sent from the same thread (the fast path); a `Reply.later` (`Reply.deferred`: in a task) suspends
/// the connection and resumes it with the answer, from the thread its work ends on; the
/// connection's server thread then makes the answer's response and sends it.
final class ServerCore: Sendable {
    private let configuration: ServerConfiguration
    private let router: Router
    private let observer: any RequestObserver
    private let limiter: ConnectionLimiter
    private let deferred = DeferredRequests()
    private let requestIDs = RequestIDs()
    private let draining = Atomic<Bool>(false)
    /// `Keep-Alive: timeout=…`: how long an idle connection stays open, so that a client's pool
    /// drops it before the server does (a request sent on a connection as it closes fails).
    private let keepAlive: String

    init(configuration: ServerConfiguration, router: Router, observer: any RequestObserver) {
        self.configuration = configuration
        self.router = router
        self.observer = observer
        limiter = ConnectionLimiter(maxTotal: configuration.maxConnections, maxPerIP: configuration.maxConnectionsPerIP,
                                    refusalRoom: configuration.hardConnectionLimit - configuration.maxConnections)
        keepAlive = "timeout=\(configuration.idleTimeoutSeconds)"
    }

    /// From now on every answer closes its connection, so that clients move off.
    func beginDraining() {
        draining.store(true, ordering: .relaxed)
    }

    /// Methods reported as they are; any other is `OTHER`, so that clients cannot grow the
    /// metrics without bound.
    private static func methodLabel(_ method: String) -> String {
        switch method {
        case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS": method
        default: "OTHER"
        }
    }

    private static let shuttingDown = HTTPError.serviceUnavailable(
        "temporarily_unavailable", "The broker is shutting down; retry shortly.", retryAfterSeconds: 1)

    /// Answers every request still waiting with 503; returns how many there were. A request that
    /// would wait from now on is answered 503 at once.
    func answerDeferredRequests() -> Int {
        let cutShort = deferred.claimAll()
        for request in cutShort {
            tb_request_complete(request.pointer, PendingAnswer(Self.shuttingDown.response, requestID: "shutdown", origin: nil).handedOver())
        }
        return cutShort.count
    }

    func handle(_ shim: ShimRequest) {
        let pointer = shim.pointer
        let target = String(cString: tb_request_target(pointer))
        var bodyLength = 0
        let bodyStart = tb_request_body(pointer, &bodyLength)
        let body = bodyLength > 0 && bodyStart != nil ? Array(UnsafeBufferPointer(start: bodyStart, count: bodyLength)) : []
        let (clientIP, proxyIP) = addresses(of: pointer)
        var request = Request(
            method: String(cString: tb_request_method(pointer)),
            target: target,
            id: requestIDs.make(clientSupplied: tb_request_header(pointer, "X-Request-Id").map { String(cString: $0) }),
            clientIP: clientIP,
            body: body,
            headers: .shim(shim),
            traceparent: TraceContext.traceparent(tb_request_header(pointer, "traceparent").map { String(cString: $0) })
        )
        let origin = corsOrigin(request)
        let reply: Reply
        let route: String
        if let error = limitError(for: pointer, targetBytes: target.utf8.count) {
            (reply, route) = (.now(error.response), router.label(for: request.path))
        } else if request.method == "OPTIONS", request.header("Access-Control-Request-Method") != nil {
            (reply, route) = (.now(CORS.preflight(allowed: origin != nil)), router.label(for: request.path))
        } else {
            (reply, route) = router.route(&request)
        }
        let record = RequestRecord(
            method: Self.methodLabel(request.method),
            route: route,
            path: Self.loggedPath(request.path),
            status: 0,
            seconds: 0,
            requestID: request.id,
            clientIP: request.clientIP,
            proxyIP: proxyIP,
            responseBytes: 0,
            traceID: request.traceparent.map { $0.dropFirst(3).prefix(32) }
        )
        switch reply {
        case .now(let answer):
            let response = Self.sendable(answer)
            finish(record, response, startNanos: tb_request_start_ns(pointer))
            tb_request_respond(pointer, makeResponse(response, requestID: request.id, origin: origin))
        case .later(let start):
            tb_request_defer(pointer)
            guard let ticket = deferred.add(shim) else {
                // The shutdown has already answered the waiting: answer this one the same way,
                // now (completing inside the handler is allowed; the shim then queues it).
                let response = Self.shuttingDown.response
                tb_request_complete(pointer, PendingAnswer(response, requestID: request.id, origin: origin).handedOver())
                finish(record, response, startNanos: tb_request_start_ns(pointer))
                return
            }
            let startNanos = tb_request_start_ns(pointer)
            start(Answer(trace: request.trace) { answer in
                guard let claimed = self.deferred.claim(ticket) else {
                    // The shutdown answered it: a stream made for this answer is given up.
                    if let stream = answer.stream { tb_stream_abandon(stream.pointer) }
                    return
                }
                let response = Self.sendable(answer)
                self.finish(record, response, startNanos: startNanos)
                tb_request_complete(claimed.pointer, PendingAnswer(response, requestID: record.requestID, origin: origin).handedOver())
            })
        }
    }

    /// The path as logged: at most its first 256 bytes (a character cut in two becomes U+FFFD).
    private static func loggedPath(_ path: Substring) -> String {
        guard path.utf8.count > 256 else { return String(path) }
        return String(decoding: path.utf8.prefix(256), as: UTF8.self)
    }

    /// Reports the request: now, or for a streamed answer once its body has gone, when its bytes
    /// and its whole duration are known. Called before the response goes to the shim, which may
    /// send it, and end its stream, at once. `record` is taken by value: were it an `inout` of
    /// `handle`, the `Task` that captures it would make `handle` box it on the heap on every
    /// request, answered later or not.
    private func finish(_ record: RequestRecord, _ response: Response, startNanos: UInt64) {
        var record = record
        record.status = response.status
        guard let stream = response.stream else {
            record.responseBytes = response.body.count
            record.seconds = Double(tb_monotonic_ns() &- startNanos) / 1e9
            observer.requestFinished(record)
            return
        }
        stream.whenEnded { [observer, record] sent in
            var ended = record
            ended.responseBytes = sent
            ended.seconds = Double(tb_monotonic_ns() &- startNanos) / 1e9
            observer.requestFinished(ended)
        }
    }

    private func limitError(for pointer: OpaquePointer, targetBytes: Int) -> HTTPError? {
        switch tb_request_limit(pointer) {
        case TB_LIMIT_CONNECTIONS:
            return .serviceUnavailable("temporarily_unavailable", "Too many connections; retry shortly.", retryAfterSeconds: 1)
        case TB_LIMIT_BODY:
            return .payloadTooLarge(limit: configuration.maxBodyBytes)
        case TB_LIMIT_MALFORMED:
            return .malformedRequest(status: 400, Self.problem(of: pointer))
        case TB_LIMIT_UNSUPPORTED:
            return .malformedRequest(status: 501, Self.problem(of: pointer))
        default:
            break
        }
        if targetBytes > configuration.maxURLBytes { return .uriTooLong(limit: configuration.maxURLBytes) }
        if tb_request_header_bytes(pointer) > configuration.maxHeaderBytes {
            return .headersTooLarge(limit: configuration.maxHeaderBytes)
        }
        return nil
    }

    /// The shim's sentence about a refused request head (it quotes nothing of the request).
    private static func problem(of pointer: OpaquePointer) -> String {
        tb_request_problem(pointer).map { String(cString: $0) } ?? "The request is malformed."
    }

    /// The request's `Origin` when it is one of the configured CORS origins, on a path open to
    /// them.
    private func corsOrigin(_ request: Request) -> String? {
        guard !configuration.corsOrigins.isEmpty, let origin = request.header("Origin")?.lowercased(),
              configuration.corsOrigins.contains(origin),
              !configuration.corsClosedPrefixes.contains(where: { request.path.hasPrefix($0) }) else { return nil }
        return origin
    }

    /// A deferred request's answer, made into the shim's response on the server thread that sends
    /// it (`tb_request_complete`): libmicrohttpd copies each header of a response into
    /// allocations of its own, which that thread frees once the response is sent. Made on the
    /// thread that answered (the proxy's loop), each would be freed by another thread than
    /// the one that allocated it, and the two threads would contend for the allocator's locks.
    func build(_ answer: UnsafeMutableRawPointer) -> OpaquePointer? {
        let pending = Unmanaged<PendingAnswer>.fromOpaque(answer).takeRetainedValue()
        return makeResponse(pending.response, requestID: pending.requestID, origin: pending.origin)
    }

    /// Lets go of an answer whose connection closed before it could be sent.
    static func drop(_ answer: UnsafeMutableRawPointer) {
        let pending = Unmanaged<PendingAnswer>.fromOpaque(answer).takeRetainedValue()
        if let stream = pending.response.stream { tb_stream_abandon(stream.pointer) }
    }

    /// Builds the shim's response, adding the headers every answer carries. Returns nil when
    /// libmicrohttpd cannot allocate one or refuses one of its headers (no memory left, or a header
    /// it writes itself): the shim then closes the connection, rather than send an answer without
    /// a header it must carry (`Cache-Control: no-store`, the security headers, CORS).
    private func makeResponse(_ response: Response, requestID: String, origin: String?) -> OpaquePointer? {
        let created = if let stream = response.stream {
            tb_response_create_stream(UInt32(response.status), stream.pointer)
        } else if let length = response.headLength {
            tb_response_create_head(UInt32(response.status), length)
        } else {
            response.body.withUnsafeBytes { tb_response_create(UInt32(response.status), $0.baseAddress, $0.count) }
        }
        guard let created else { return nil }
        // Every add is attempted; one refusal makes the whole response go.
        var added = true
        for header in response.headers {
            added = Self.addHeader(to: created, header.name, header.value) && added
        }
        if response.header("Cache-Control") == nil {
            added = Self.addHeader(to: created, "Cache-Control", "no-store") && added
        }
        if response.header("Content-Security-Policy") == nil {
            added = Self.addHeader(to: created, "Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'") && added
        }
        added = Self.addHeader(to: created, "X-Request-Id", requestID) && added
        added = Self.addHeader(to: created, "X-Content-Type-Options", "nosniff") && added
        added = Self.addHeader(to: created, "X-Frame-Options", "DENY") && added
        added = Self.addHeader(to: created, "Referrer-Policy", "no-referrer") && added
        if let origin {
            for header in CORS.headers(origin: origin) { added = Self.addHeader(to: created, header.name, header.value) && added }
        }
        if response.closeConnection || draining.load(ordering: .relaxed) {
            added = tb_response_close_connection(created) != 0 && added
        } else {
            added = Self.addHeader(to: created, "Keep-Alive", keepAlive) && added
        }
        guard added else {
            // Freeing the response also gives up its stream, if any.
            tb_response_free(created)
            observer.serverMessage("libmicrohttpd refused a header of a \(response.status) answer: the connection is closed without it", fromLibrary: false)
            return nil
        }
        return created
    }

    /// Passes the header through `withCString`, which lends a string's own bytes (or, for a
    /// short one, a copy on the stack); a `String` handed straight to a C parameter is copied to
    /// a new array every time. False when libmicrohttpd refused it.
    private static func addHeader(to response: OpaquePointer, _ name: String, _ value: String) -> Bool {
        name.withCString { name in
            value.withCString { value in tb_response_add_header(response, name, value) != 0 }
        }
    }

    /// `response`, or a 500 in its place when one of its headers cannot be sent as it is (its
    /// stream, if any, given up): decided before the request is reported, so that the access log
    /// and the metrics count what the client gets.
    private static func sendable(_ response: Response) -> Response {
        guard response.headers.contains(where: { !isSafeHeader($0) }) else { return response }
        if let stream = response.stream { tb_stream_abandon(stream.pointer) }
        return HTTPError(status: 500, code: "server_error", description: "The broker built an invalid response.").response
    }

    /// A header libmicrohttpd can send as is: no line breaks, no NULs.
    private static func isSafeHeader(_ header: HTTPHeader) -> Bool {
        func isClean(_ text: String) -> Bool {
            !text.utf8.contains { $0 == 0x0A || $0 == 0x0D || $0 == 0 }
        }
        return !header.name.isEmpty && isClean(header.name) && isClean(header.value)
    }

    /// The client's address — the connection's, or behind a trusted proxy the one its
    /// `X-Forwarded-For` names (`ForwardedFor`) — and, in that case, the proxy's.
    private func addresses(of pointer: OpaquePointer) -> (client: String, proxy: String?) {
        let peer = Self.peerIP(of: pointer)
        guard !configuration.trustedProxies.isEmpty else { return (peer, nil) }
        return ForwardedFor.addresses(peer: peer, trusted: configuration.trustedProxies) {
            Self.joinedHeader("X-Forwarded-For", of: pointer)
        }
    }

    private static func peerIP(of pointer: OpaquePointer) -> String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer in
            guard let base = buffer.baseAddress, tb_request_client_ip(pointer, base, buffer.count) != 0 else {
                return "unknown"
            }
            return String(cString: base)
        }
    }

    /// Every value of a header, joined by ", "; nil when there is none (or, which cannot happen,
    /// when the values do not fit: a list cut short loses its right end, the part believed).
    static func joinedHeader(_ name: String, of pointer: OpaquePointer) -> String? {
        // The request's header bytes count each value's name too, which is longer than a
        // separator: the joined values fit (server.c, tb_count_header).
        var buffer = [UInt8](repeating: 0, count: tb_request_header_bytes(pointer) + 1)
        let length = buffer.withUnsafeMutableBytes { bytes in
            name.withCString { name in
                tb_request_header_joined(pointer, name, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count)
            }
        }
        guard length > 0, length < buffer.count else { return nil }
        return String(decoding: buffer[..<length], as: UTF8.self)
    }

    func connectionOpened(from ip: String) -> ConnectionLimiter.Admission { limiter.open(ip) }
    func connectionClosed(from ip: String, admitted: Bool) { limiter.close(ip, admitted: admitted) }
    func serverMessage(_ message: String, fromLibrary: Bool) { observer.serverMessage(message, fromLibrary: fromLibrary) }
}

/// What a deferred request is answered with, until its server thread makes the response
/// (``ServerCore/build(_:)``).
private final class PendingAnswer {
    let response: Response
    let requestID: String
    let origin: String?

    init(_ response: Response, requestID: String, origin: String?) {
        self.response = response
        self.requestID = requestID
        self.origin = origin
    }

    /// Retained for the shim, which gives it back once: to `build` or to `drop`.
    func handedOver() -> UnsafeMutableRawPointer {
        Unmanaged.passRetained(self).toOpaque()
    }
}
