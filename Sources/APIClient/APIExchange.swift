import CurlShim
import Foundation

/// One request to an API upstream for the API proxy, and its answer: performed by libcurl on the
/// proxy's event loop (`perform` suspends the caller meanwhile). No redirect is followed and no
/// proxy from the environment used; only https (and http where allowed) is spoken; every address
/// the host resolves to is checked before connecting, so that neither a name that resolves to an
/// internal address nor one that changes its answer between a check and the connection (DNS
/// rebinding) reaches loopback, private, link-local, cloud-metadata, multicast or reserved
/// addresses unless the provider allows private addresses; the answer is held whole up to a cap,
/// never truncated.
public struct APIRequest: Sendable {
    public var method: String
    public var url: String
    /// Sent as they are, `(name, value)`; names and values already checked by the caller.
    public var headers: [(String, String)]
    /// nil: no body.
    public var body: [UInt8]?
    public var timeoutSeconds: Double
    /// Fail sooner when nothing arrives for this long (nil: no such bound).
    public var silenceSeconds: Double?
    public var maxResponseBytes: Int
    public var allowPrivateAddresses: Bool
    public var allowHTTP: Bool
    /// Who may share connections with this request (an API's pool, or one session): a connection
    /// serves only requests with the same key, address policy, schemes and authorities.
    public var connectionKey: String
    /// What its TLS connections are verified against; nil: libcurl's own configuration.
    public var authorities: CertificateAuthorities?

    public init(method: String, url: String, headers: [(String, String)], body: [UInt8]?, timeoutSeconds: Double,
                maxResponseBytes: Int, allowPrivateAddresses: Bool, allowHTTP: Bool, connectionKey: String,
                authorities: CertificateAuthorities?, silenceSeconds: Double? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeoutSeconds = timeoutSeconds
        self.maxResponseBytes = maxResponseBytes
        self.allowPrivateAddresses = allowPrivateAddresses
        self.allowHTTP = allowHTTP
        self.connectionKey = connectionKey
        self.authorities = authorities
        self.silenceSeconds = silenceSeconds
    }
}

/// The upstream's answer.
public struct APIResponse: Sendable {
    public let status: Int
    /// Header lines in order, as received (names as the upstream spelled them).
    public let headers: [(name: String, value: String)]
    public let body: [UInt8]

    /// An answer as a transport other than ``APITransfers`` gives it (a scripted API in tests).
    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The last value of the header `name` (any case).
    public func header(_ name: String) -> String? {
        headers.last { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// Why there is no answer. Descriptions never hold a header, body or query string.
public enum APIExchangeError: Error, Sendable, Equatable {
    /// Every address of the host is in a refused range.
    case addressRefused
    /// The answer's body is over the cap.
    case tooLarge
    case timedOut
    /// Resolution or connection failed.
    case unreachable(String)
    /// The TLS handshake failed, or the certificate did not verify.
    case tls(String)
    case failed(String)
    /// The loop runs as many transfers as it takes and the line in front of them is full, or the
    /// request waited in it past its timeout: not sent.
    case busy
}

/// Where a streamed answer's body goes, as it arrives (on the loop's thread, which must never
/// wait: a sink without room says so, and the transfer pauses until the sink calls its waker).
public protocol APIBodySink: Sendable {
    /// False for a sink that takes none of the body: its transfer stops at the head, rather than
    /// when the first bytes are offered (which a stalled API may never send). Asked once the
    /// head has come and the caller's completion has had it.
    var takesBody: Bool { get }
    /// Takes all of `bytes`, or none of them.
    func offer(_ bytes: UnsafeRawBufferPointer, waker: APIBodyWaker) -> APIBodyOffer
    /// The body ended: whole (`ok`), or broken off (a failed transfer, or over the cap).
    func finish(ok: Bool)
}

extension APIBodySink {
    public var takesBody: Bool { true }
}

/// What a sink did with bytes offered to it.
public enum APIBodyOffer: Sendable {
    case taken
    /// No room for them yet: the sink calls its waker once, from any thread, when there is, or
    /// when nobody will read them; the transfer pauses meanwhile, up to its deadline.
    case full
    /// Nobody reads any more: the transfer stops.
    case stop
}

/// How a sink that was full tells the transfer to go on: `function(context, tag)`, called once.
public struct APIBodyWaker {
    public let function: @convention(c) (UnsafeMutableRawPointer?, UInt64) -> Void
    public let context: UnsafeMutableRawPointer?
    public let tag: UInt64
}

/// An answer: whole, or its head with the body streaming into the sink chosen for it.
public enum APIAnswer: Sendable {
    case whole(APIResponse)
    case streaming(status: Int, headers: [(name: String, value: String)])
}

/// The proxy's transfers: one event loop (libcurl's multi interface on one thread, CurlShim's
/// loop.c) that runs up to `maxInFlight` of them at once, with a line of at most as many more in
/// front of them — beyond it, or once a transfer has waited its whole timeout there, it fails at
/// once (`busy`). No transfer holds a thread: a slow reader pauses its own, which still ends by
/// its timeout.
public final class APITransfers: @unchecked Sendable {
    // The loop is safe to use from any thread; this object owns it.
    private let loop: OpaquePointer

    /// Nil when libcurl cannot make the loop's multi handle (no memory): the caller does not start.
    public init?(maxInFlight: Int) {
        guard let loop = tb_proxy_loop_create(Int32(clamping: maxInFlight)) else { return nil }
        self.loop = loop
    }

    deinit {
        tb_proxy_loop_release(loop)
    }

    /// What the loop's transfers did with connections so far: opened, reused, and open now.
    public var connections: (opened: Int, reused: Int, open: Int) {
        let counts = tb_proxy_loop_connections(loop)
        return (Int(counts.opened), Int(counts.reused), Int(counts.open))
    }

    /// Performs `request`. With `stream`, once the head has come (status, and the body's length
    /// when known) `stream` may give a sink: the answer is then `.streaming` at once, while the
    /// body goes on into the sink; else the body is held and the answer is `.whole` at the end.
    public func perform(
        _ request: APIRequest, stream: (@Sendable (_ status: Int, _ contentLength: Int64?) -> (any APIBodySink)?)? = nil
    ) async -> Result<APIAnswer, APIExchangeError> {
        await withCheckedContinuation { continuation in
            start(request, stream: stream) { continuation.resume(returning: $0) }
        }
    }

    /// `perform` for a caller that is not a task: `completion` gets the answer once, on the
    /// loop's thread (or on the caller's, at once, when the transfer is refused as `busy`). It
    /// must not block: every transfer waits while it runs.
    public func start(
        _ request: APIRequest, stream: (@Sendable (_ status: Int, _ contentLength: Int64?) -> (any APIBodySink)?)? = nil,
        completion: @escaping @Sendable (Result<APIAnswer, APIExchangeError>) -> Void
    ) {
        let transfer = Transfer(choose: stream, completion: completion, loop: UnsafeMutableRawPointer(loop))
        // The loop holds the transfer until its on_done.
        let context = Unmanaged.passRetained(transfer).toOpaque()
        guard transfer.start(request, on: loop, context: context) else {
            Unmanaged<Transfer>.fromOpaque(context).release()
            return completion(.failure(.busy))
        }
    }
}

public enum APIExchange {
    /// Whether the address policy refuses an IP literal; nil when `address` is not one.
    public static func refuses(address: String) -> Bool? {
        switch tb_proxy_address_refused(address) {
        case 0: false
        case 1: true
        default: nil
        }
    }

    /// Header lines ("Name: value\r\n"…) as `(name, value)`, the value without the spaces and tabs
    /// around it, and the name without those before the colon (a proxy removes them, RFC 9112
    /// §5.1); a line without a colon is skipped. Read with memchr: this runs for every proxied
    /// answer, on the loop's thread.
    static func headers(_ bytes: UnsafeRawBufferPointer) -> [(name: String, value: String)] {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return [] }
        let end = base + bytes.count
        /// Where `byte` is first in `start..<limit`, found by `memchr` (this runs for every
        /// proxied answer: a byte-by-byte loop was most of its cost).
        func find(_ byte: UInt8, from start: UnsafeRawPointer, to limit: UnsafeRawPointer) -> UnsafeRawPointer? {
            memchr(start, Int32(byte), limit - start).map { UnsafeRawPointer($0) }
        }
        func isBlank(_ pointer: UnsafeRawPointer) -> Bool {
            let byte = pointer.load(as: UInt8.self)
            return byte == 0x20 || byte == 0x09
        }
        func text(_ start: UnsafeRawPointer, _ limit: UnsafeRawPointer) -> String {
            String(decoding: UnsafeRawBufferPointer(start: start, count: limit - start), as: UTF8.self)
        }
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(16)
        var lineStart = UnsafeRawPointer(base)
        while lineStart < end {
            let newline = find(0x0A, from: lineStart, to: end) ?? end
            var lineEnd = newline
            if lineEnd > lineStart, (lineEnd - 1).load(as: UInt8.self) == 0x0D { lineEnd -= 1 }
            if let colon = find(0x3A, from: lineStart, to: lineEnd) {
                var valueStart = colon + 1, valueEnd = lineEnd, nameEnd = colon
                while valueStart < valueEnd, isBlank(valueStart) { valueStart += 1 }
                while valueEnd > valueStart, isBlank(valueEnd - 1) { valueEnd -= 1 }
                while nameEnd > lineStart, isBlank(nameEnd - 1) { nameEnd -= 1 }
                headers.append((text(lineStart, nameEnd), text(valueStart, valueEnd)))
            }
            lineStart = newline < end ? newline + 1 : end
        }
        return headers
    }
}

/// One transfer on the loop: the caller's completion, called once — at the head when the body
/// streams, else at the end — and the sink the body streams into.
private final class Transfer: @unchecked Sendable {
    // Set and read on the loop's thread only (the callbacks run there), after `start`.
    private let choose: (@Sendable (Int, Int64?) -> (any APIBodySink)?)?
    private let completion: @Sendable (Result<APIAnswer, APIExchangeError>) -> Void
    private let loop: UnsafeMutableRawPointer
    private var sink: (any APIBodySink)?

    init(choose: (@Sendable (Int, Int64?) -> (any APIBodySink)?)?, completion: @escaping @Sendable (Result<APIAnswer, APIExchangeError>) -> Void,
         loop: UnsafeMutableRawPointer) {
        self.choose = choose
        self.completion = completion
        self.loop = loop
    }

    /// Hands `request` to the loop, which copies it; false when the loop's line is full.
    func start(_ request: APIRequest, on loop: OpaquePointer, context: UnsafeMutableRawPointer) -> Bool {
        let lines = Self.headerLines(request.headers)
        let body = request.body ?? []
        let timeout = Int(request.timeoutSeconds * 1000)
        return request.method.withCString { method in
            request.url.withCString { url in
                request.connectionKey.withCString { connectionKey in
                    lines.text.withUnsafeBufferPointer { text in
                        withUnsafeTemporaryAllocation(of: UnsafePointer<CChar>?.self, capacity: max(lines.starts.count, 1)) { headerArray in
                            for (index, start) in lines.starts.enumerated() {
                                headerArray[index] = UnsafeRawPointer(text.baseAddress! + start).assumingMemoryBound(to: CChar.self)
                            }
                            return body.withUnsafeBufferPointer { bodyBytes in
                                var cRequest = tb_proxy_request(
                                    method: method, url: url, headers: lines.starts.isEmpty ? nil : UnsafePointer(headerArray.baseAddress),
                                    header_count: lines.starts.count,
                                    body: bodyBytes.baseAddress, body_length: bodyBytes.count, has_body: request.body == nil ? 0 : 1,
                                    timeout_ms: timeout, connect_timeout_ms: timeout / 2,
                                    silence_timeout_ms: Int(((request.silenceSeconds ?? 0) * 1000).rounded()),
                                    max_response_bytes: request.maxResponseBytes,
                                    allow_private_addresses: request.allowPrivateAddresses ? 1 : 0, allow_http: request.allowHTTP ? 1 : 0,
                                    connection_key: connectionKey, ca_store: request.authorities?.store,
                                    on_head: choose == nil ? nil : { context, status, headers, length, contentLength in
                                        let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
                                        return Int32(transfer.head(Int(status), headers, length, contentLength).rawValue)
                                    },
                                    on_body: { context, data, length, tag in
                                        let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
                                        return transfer.offer(UnsafeRawBufferPointer(start: data, count: length), tag: tag)
                                    },
                                    on_done: { context, response in
                                        Unmanaged<Transfer>.fromOpaque(context!).takeRetainedValue().done(response!.pointee)
                                    },
                                    context: context
                                )
                                return tb_proxy_start(loop, &cRequest) != 0
                            }
                        }
                    }
                }
            }
        }
    }

    /// The header lines "Name: value", each ended by a NUL, in one buffer (the shim copies them),
    /// and where each begins: two allocations for all the headers of a request.
    private static func headerLines(_ headers: [(String, String)]) -> (text: [UInt8], starts: [Int]) {
        var text: [UInt8] = []
        text.reserveCapacity(headers.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 3 })
        var starts: [Int] = []
        starts.reserveCapacity(headers.count)
        for (name, value) in headers {
            starts.append(text.count)
            text.append(contentsOf: name.utf8)
            text.append(contentsOf: ": ".utf8)
            text.append(contentsOf: value.utf8)
            text.append(0)
        }
        return (text, starts)
    }

    /// The head has come: stream the body when `choose` gives a sink for it, or stop here when
    /// that sink takes none of it.
    private func head(_ status: Int, _ headers: UnsafePointer<CChar>?, _ length: Int, _ contentLength: Int64) -> tb_proxy_head {
        guard let choose, let chosen = choose(status, contentLength >= 0 ? contentLength : nil) else { return TB_HEAD_HOLD }
        sink = chosen
        completion(.success(.streaming(status: status, headers: APIExchange.headers(UnsafeRawBufferPointer(start: headers, count: length)))))
        // Asked after the completion, which may have given the answer up (its sink then takes nothing).
        return chosen.takesBody ? TB_HEAD_STREAM : TB_HEAD_STOP
    }

    /// Body bytes for the sink: a tb_proxy_body.
    private func offer(_ bytes: UnsafeRawBufferPointer, tag: UInt64) -> Int32 {
        let outcome = sink?.offer(bytes, waker: APIBodyWaker(function: tb_proxy_resume, context: loop, tag: tag)) ?? .stop
        switch outcome {
        case .taken: return Int32(TB_BODY_TAKEN.rawValue)
        case .full: return Int32(TB_BODY_FULL.rawValue)
        case .stop: return Int32(TB_BODY_STOP.rawValue)
        }
    }

    /// The transfer has ended.
    private func done(_ response: tb_proxy_response) {
        let outcome = Self.outcome(response)
        if let sink {
            // The caller has the head already; the body ends here, whole or broken off.
            sink.finish(ok: outcome == nil)
            return
        }
        if let outcome {
            completion(.failure(outcome))
            return
        }
        let headers = APIExchange.headers(UnsafeRawBufferPointer(start: response.headers, count: response.headers_length))
        let bytes = response.body.map { Array(UnsafeBufferPointer(start: $0, count: response.body_length)) } ?? []
        completion(.success(.whole(APIResponse(status: response.status, headers: headers, body: bytes))))
    }

    private static func outcome(_ response: tb_proxy_response) -> APIExchangeError? {
        let error = withUnsafeBytes(of: response.error) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        switch Int(response.outcome) {
        case Int(TB_PROXY_OK.rawValue): return nil
        case Int(TB_PROXY_ADDRESS_REFUSED.rawValue): return .addressRefused
        case Int(TB_PROXY_TOO_LARGE.rawValue): return .tooLarge
        case Int(TB_PROXY_TIMEOUT.rawValue): return .timedOut
        case Int(TB_PROXY_UNREACHABLE.rawValue): return .unreachable(error)
        case Int(TB_PROXY_TLS.rawValue): return .tls(error)
        case Int(TB_PROXY_BUSY.rawValue): return .busy
        default: return .failed(error)
        }
    }
}
