internal import MHDShim
import Synchronization

/// The HTTP server's life cycle: bind, serve, shut down.
///
/// Binding comes first and on its own, so that the application knows its port (port 0 picks a
/// free one) before it builds its routes; `start(router:)` then serves them.
public final class HTTPServer: Sendable {
    private let configuration: ServerConfiguration
    private let observer: any RequestObserver
    private let state: Mutex<State>
    /// The bound port.
    public let port: UInt16

    private enum State {
        case bound(listener: Int32)
        case running(RunningServer)
        /// `shutdown` has begun: requests still drain.
        case stopping(RunningServer)
        case stopped
    }

    /// Binds the listening socket.
    public init(configuration: ServerConfiguration, observer: any RequestObserver) throws(ServerStartError) {
        var error = [CChar](repeating: 0, count: 256)
        var port: UInt16 = 0
        let listener = tb_listen(configuration.host, configuration.port, &port, &error, error.count)
        guard listener >= 0 else { throw ServerStartError(error) }
        self.configuration = configuration
        self.observer = observer
        self.port = port
        state = Mutex(.bound(listener: listener))
    }

    deinit {
        // A server bound but never started (its application failed to start) gives its port back.
        state.withLock { state in
            if case .bound(let listener) = state { tb_close_socket(listener) }
        }
    }

    /// Serves `router` on the bound socket.
    public func start(router: Router) throws(ServerStartError) {
        try state.withLock { state throws(ServerStartError) in
            guard case .bound(let listener) = state else { throw ServerStartError("the server was already started") }
            let core = ServerCore(configuration: configuration, router: router, observer: observer)
            var options = tb_server_options()
            options.listen_socket = listener
            options.threads = UInt32(configuration.threads)
            options.hard_connection_limit = UInt32(configuration.hardConnectionLimit)
            options.idle_timeout_seconds = UInt32(configuration.idleTimeoutSeconds)
            options.request_head_timeout_seconds = UInt32(configuration.requestHeadTimeoutSeconds)
            options.request_body_min_rate = configuration.requestBodyMinBytesPerSecond
            options.connection_memory_bytes = configuration.connectionMemoryBytes
            options.max_body_bytes = configuration.maxBodyBytes
            let callbacks = tb_callbacks(
                on_request: shimOnRequest,
                on_connection_open: shimOnConnectionOpen,
                on_connection_close: shimOnConnectionClose,
                on_log: shimOnLog,
                build_answer: shimBuildAnswer,
                drop_answer: shimDropAnswer
            )
            // The daemon holds this retain until `shutdown` stops it.
            let context = Unmanaged.passRetained(core)
            var error = [CChar](repeating: 0, count: 256)
            let started = Self.withTLS(configuration.tls) { certificate, key in
                options.tls_certificate_pem = certificate
                options.tls_key_pem = key
                return tb_server_start(&options, callbacks, context.toOpaque(), &error, error.count)
            }
            guard let server = started else {
                context.release()
                state = .stopped
                throw ServerStartError(error)
            }
            state = .running(RunningServer(pointer: server, core: context))
        }
    }

    /// Requests received and not yet answered (0 when not serving).
    public var activeRequests: Int {
        state.withLock { state in
            switch state {
            case .running(let server), .stopping(let server): Int(tb_server_active_requests(server.pointer))
            case .bound, .stopped: 0
            }
        }
    }

    /// From now on every answer closes its connection (its client reconnects, through its
    /// balancer, elsewhere), while the server goes on accepting: the start of a shutdown.
    public func closeConnectionsAfterAnswers() {
        state.withLock { state in
            if case .running(let server) = state { server.core.takeUnretainedValue().beginDraining() }
        }
    }

    /// Stops accepting connections, lets pending requests finish within `grace`, answers those
    /// still waiting with 503, then closes everything. Answers how many requests were cut short.
    @discardableResult
    public func shutdown(grace: Duration) async -> Int {
        let running: RunningServer? = state.withLock { state in
            switch state {
            case .running(let server):
                state = .stopping(server)
                return server
            case .bound(let listener):
                tb_close_socket(listener)
                state = .stopped
                return nil
            case .stopping, .stopped: return nil
            }
        }
        guard let running else { return 0 }
        let core = running.core.takeUnretainedValue()
        core.beginDraining()
        tb_server_quiesce(running.pointer)
        await waitForRequests(on: running, until: .now + grace)
        let cutShort = core.answerDeferredRequests()
        // libmicrohttpd aborts if stopped with a suspended connection: give the resumed ones a
        // moment to be answered and completed.
        await waitForRequests(on: running, until: .now + .seconds(2))
        // Out of `state` first, so that nothing reads the daemon once it is freed; stopped outside
        // the lock, because stopping waits for the server threads, which may be waiting for it.
        state.withLock { $0 = .stopped }
        tb_server_stop(running.pointer)
        running.core.release()
        return cutShort
    }

    /// Calls `body` with C strings of the PEM certificate and key, or NULLs without TLS.
    private static func withTLS<T>(
        _ tls: (certificate: String, key: String)?,
        _ body: (UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> T
    ) -> T {
        guard let tls else { return body(nil, nil) }
        return tls.certificate.withCString { certificate in tls.key.withCString { key in body(certificate, key) } }
    }

    private func waitForRequests(on server: RunningServer, until deadline: ContinuousClock.Instant) async {
        while tb_server_active_requests(server.pointer) > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}

/// Why the server could not start (for example, the port is in use).
public struct ServerStartError: Error, Sendable, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }

    init(_ message: [CChar]) {
        description = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// The running daemon and the retain that keeps its request handler alive for its callbacks.
private struct RunningServer: @unchecked Sendable {
    // The pointer is only used under the `state` lock or after being taken out of it.
    let pointer: OpaquePointer
    let core: Unmanaged<ServerCore>
}

// The shim's callbacks. They capture nothing: the request handler arrives through the context.

private func core(_ context: UnsafeMutableRawPointer?) -> ServerCore? {
    context.map { Unmanaged<ServerCore>.fromOpaque($0).takeUnretainedValue() }
}

private func shimOnRequest(_ context: UnsafeMutableRawPointer?, _ request: OpaquePointer?) {
    guard let request else { return }
    core(context)?.handle(ShimRequest(pointer: request))
}

private func shimOnConnectionOpen(_ context: UnsafeMutableRawPointer?, _ ip: UnsafePointer<CChar>?) -> Int32 {
    guard let core = core(context) else { return 0 }
    return core.connectionOpened(from: ip.map { String(cString: $0) } ?? "unknown").rawValue
}

private func shimOnConnectionClose(_ context: UnsafeMutableRawPointer?, _ ip: UnsafePointer<CChar>?, _ admitted: Int32) {
    core(context)?.connectionClosed(from: ip.map { String(cString: $0) } ?? "unknown", admitted: admitted != 0)
}

private func shimOnLog(_ context: UnsafeMutableRawPointer?, _ message: UnsafePointer<CChar>?, _ fromLibrary: Int32) {
    guard let message else { return }
    core(context)?.serverMessage(String(cString: message), fromLibrary: fromLibrary != 0)
}

private func shimBuildAnswer(_ context: UnsafeMutableRawPointer?, _ answer: UnsafeMutableRawPointer?) -> OpaquePointer? {
    guard let answer else { return nil }
    guard let core = core(context) else {
        ServerCore.drop(answer)
        return nil
    }
    return core.build(answer)
}

private func shimDropAnswer(_ context: UnsafeMutableRawPointer?, _ answer: UnsafeMutableRawPointer?) {
    if let answer { ServerCore.drop(answer) }
}
