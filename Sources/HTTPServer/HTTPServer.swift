internal import MHDShim
import Synchronization

/// The HTTP server: libmicrohttpd underneath (through the shim), a `Router` on top.
///
/// Requests enter in `handle(_:)` on a server thread. The limits are checked first, then the
/// router runs the handler. A `Reply.now` is sent from the same thread (the fast path); a
/// `Reply.later` suspends the connection, runs in a task, and resumes it with the answer.
public final class HTTPServer: Sendable {
    private let configuration: ServerConfiguration
    private let router: Router
    private let observer: any RequestObserver
    private let limiter: ConnectionLimiter
    private let deferred = DeferredRequests()
    private let requestIDs = RequestIDs()
    private let draining = Atomic<Bool>(false)
    private let running = Mutex<RunningServer?>(nil)

    public init(configuration: ServerConfiguration, router: Router, observer: any RequestObserver) {
        self.configuration = configuration
        self.router = router
        self.observer = observer
        limiter = ConnectionLimiter(maxTotal: configuration.maxConnections, maxPerIP: configuration.maxConnectionsPerIP)
    }

    /// Starts listening; answers the bound port.
    @discardableResult
    public func start() throws(ServerStartError) -> UInt16 {
        var options = tb_server_options()
        options.port = configuration.port
        options.threads = UInt32(max(1, configuration.threads))
        options.hard_connection_limit = UInt32(configuration.hardConnectionLimit)
        options.idle_timeout_seconds = UInt32(configuration.idleTimeoutSeconds)
        options.connection_memory_bytes = configuration.connectionMemoryBytes
        options.max_body_bytes = configuration.maxBodyBytes
        let callbacks = tb_callbacks(
            on_request: shimOnRequest,
            on_connection_open: shimOnConnectionOpen,
            on_connection_close: shimOnConnectionClose,
            on_log: shimOnLog
        )
        // The daemon holds this retain until `shutdown` stops it.
        let context = Unmanaged.passRetained(self)
        var error = [CChar](repeating: 0, count: 256)
        let server = configuration.host.withCString { host in
            options.host = host
            return tb_server_start(&options, callbacks, context.toOpaque(), &error, error.count)
        }
        guard let server else {
            context.release()
            throw ServerStartError(description: String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        running.withLock { $0 = RunningServer(pointer: server, context: context) }
        return tb_server_port(server)
    }

    /// The bound port, while running.
    public var port: UInt16? {
        running.withLock { $0.map { tb_server_port($0.pointer) } }
    }

    /// Stops accepting connections, lets pending requests finish within `grace`, answers those
    /// still waiting with 503, then closes everything. Answers how many requests were cut short.
    @discardableResult
    public func shutdown(grace: Duration) async -> Int {
        guard let server = running.withLock({ $0.take() }) else { return 0 }
        draining.store(true, ordering: .relaxed)
        tb_server_quiesce(server.pointer)
        await waitForRequests(on: server, until: .now + grace)
        let cutShort = deferred.claimAll()
        let error = HTTPError.serviceUnavailable("temporarily_unavailable", "The broker is shutting down; retry shortly.", retryAfterSeconds: 1)
        for request in cutShort {
            tb_request_complete(request.pointer, makeResponse(error.response, requestID: "shutdown"))
        }
        // libmicrohttpd aborts if stopped with a suspended connection: give the resumed ones a
        // moment to be answered and completed.
        await waitForRequests(on: server, until: .now + .seconds(2))
        tb_server_stop(server.pointer)
        server.context.release()
        return cutShort.count
    }

    private func waitForRequests(on server: RunningServer, until deadline: ContinuousClock.Instant) async {
        while tb_server_active_requests(server.pointer) > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    // MARK: Requests

    func handle(_ shim: ShimRequest) {
        observer.requestStarted()
        let pointer = shim.pointer
        let target = String(cString: tb_request_target(pointer))
        var bodyLength = 0
        let bodyStart = tb_request_body(pointer, &bodyLength)
        let body = bodyLength > 0 && bodyStart != nil ? Array(UnsafeBufferPointer(start: bodyStart, count: bodyLength)) : []
        let request = Request(
            method: String(cString: tb_request_method(pointer)),
            target: target,
            id: requestIDs.make(clientSupplied: tb_request_header(pointer, "X-Request-Id").map { String(cString: $0) }),
            clientIP: Self.clientIP(of: pointer),
            body: body,
            headers: .shim(shim)
        )
        let reply: Reply
        if let error = limitError(for: pointer, targetBytes: target.utf8.count) {
            reply = .now(error.response)
        } else {
            reply = router.reply(to: request)
        }
        var record = RequestRecord(
            method: request.method,
            route: router.label(for: request.path),
            path: String(request.path.prefix(256)),
            status: 0,
            seconds: 0,
            requestID: request.id,
            clientIP: request.clientIP,
            responseBytes: 0
        )
        switch reply {
        case .now(let response):
            tb_request_respond(pointer, makeResponse(response, requestID: request.id))
            finish(&record, response, startNanos: tb_request_start_ns(pointer))
        case .later(let work):
            tb_request_defer(pointer)
            let ticket = deferred.add(shim)
            Task {
                let response = await work()
                guard let claimed = self.deferred.claim(ticket) else { return }
                let startNanos = tb_request_start_ns(claimed.pointer)
                tb_request_complete(claimed.pointer, self.makeResponse(response, requestID: record.requestID))
                self.finish(&record, response, startNanos: startNanos)
            }
        }
    }

    private func finish(_ record: inout RequestRecord, _ response: Response, startNanos: UInt64) {
        record.status = response.status
        record.responseBytes = response.body.count
        record.seconds = Double(tb_monotonic_ns() &- startNanos) / 1e9
        observer.requestFinished(record)
    }

    private func limitError(for pointer: OpaquePointer, targetBytes: Int) -> HTTPError? {
        switch tb_request_limit(pointer) {
        case TB_LIMIT_CONNECTIONS:
            return .serviceUnavailable("temporarily_unavailable", "Too many connections; retry shortly.", retryAfterSeconds: 1)
        case TB_LIMIT_BODY:
            return .payloadTooLarge(limit: configuration.maxBodyBytes)
        default:
            break
        }
        if targetBytes > configuration.maxURLBytes { return .uriTooLong(limit: configuration.maxURLBytes) }
        if tb_request_header_bytes(pointer) > configuration.maxHeaderBytes {
            return .headersTooLarge(limit: configuration.maxHeaderBytes)
        }
        return nil
    }

    /// Builds the shim's response, adding the headers every answer carries. Returns nil only when
    /// libmicrohttpd cannot allocate one (the shim then closes the connection).
    private func makeResponse(_ response: Response, requestID: String) -> OpaquePointer? {
        var response = response
        if response.headers.contains(where: { !Self.isSafeHeader($0) }) {
            response = HTTPError(status: 500, code: "server_error", description: "The broker built an invalid response.").response
        }
        let created = response.body.withUnsafeBytes { tb_response_create(UInt32(response.status), $0.baseAddress, $0.count) }
        guard let created else { return nil }
        for header in response.headers {
            tb_response_add_header(created, header.name, header.value)
        }
        if response.header("Cache-Control") == nil {
            tb_response_add_header(created, "Cache-Control", "no-store")
        }
        tb_response_add_header(created, "X-Request-Id", requestID)
        tb_response_add_header(created, "X-Content-Type-Options", "nosniff")
        if response.closeConnection || draining.load(ordering: .relaxed) {
            tb_response_close_connection(created)
        }
        return created
    }

    /// A header libmicrohttpd can send as is: no line breaks, no NULs.
    private static func isSafeHeader(_ header: HTTPHeader) -> Bool {
        func isClean(_ text: String) -> Bool {
            !text.utf8.contains { $0 == 0x0A || $0 == 0x0D || $0 == 0 }
        }
        return !header.name.isEmpty && isClean(header.name) && isClean(header.value)
    }

    private static func clientIP(of pointer: OpaquePointer) -> String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer in
            guard let base = buffer.baseAddress, tb_request_client_ip(pointer, base, buffer.count) != 0 else {
                return "unknown"
            }
            return String(cString: base)
        }
    }

    // MARK: Connections

    func connectionOpened(from ip: String) -> Bool { limiter.open(ip) }
    func connectionClosed(from ip: String) { limiter.close(ip) }
    func serverMessage(_ message: String) { observer.serverMessage(message) }
}

/// Why the server could not start (for example, the port is in use).
public struct ServerStartError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

/// The running daemon and the retain that keeps the server alive for its callbacks.
private struct RunningServer: @unchecked Sendable {
    // The pointer is only used under the `running` lock or after being taken out of it.
    let pointer: OpaquePointer
    let context: Unmanaged<HTTPServer>
}

// The shim's callbacks. They capture nothing: the server arrives through the context pointer.

private func server(_ context: UnsafeMutableRawPointer?) -> HTTPServer? {
    context.map { Unmanaged<HTTPServer>.fromOpaque($0).takeUnretainedValue() }
}

private func shimOnRequest(_ context: UnsafeMutableRawPointer?, _ request: OpaquePointer?) {
    guard let request else { return }
    server(context)?.handle(ShimRequest(pointer: request))
}

private func shimOnConnectionOpen(_ context: UnsafeMutableRawPointer?, _ ip: UnsafePointer<CChar>?) -> Int32 {
    guard let server = server(context) else { return 0 }
    return server.connectionOpened(from: ip.map { String(cString: $0) } ?? "unknown") ? 1 : 0
}

private func shimOnConnectionClose(_ context: UnsafeMutableRawPointer?, _ ip: UnsafePointer<CChar>?) {
    server(context)?.connectionClosed(from: ip.map { String(cString: $0) } ?? "unknown")
}

private func shimOnLog(_ context: UnsafeMutableRawPointer?, _ message: UnsafePointer<CChar>?) {
    guard let message else { return }
    server(context)?.serverMessage(String(cString: message))
}
