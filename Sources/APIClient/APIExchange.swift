import CurlShim
import Foundation

/// One request to an API upstream for the API proxy, and its answer: performed by libcurl on one
/// of the proxy's threads (`perform` suspends the caller meanwhile). No redirect is followed and no
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
    public var maxResponseBytes: Int
    public var allowPrivateAddresses: Bool
    public var allowHTTP: Bool
    /// Who may share connections with this request (the API proxy: the session): a connection
    /// serves only requests with the same key.
    public var connectionKey: String

    public init(method: String, url: String, headers: [(String, String)], body: [UInt8]?, timeoutSeconds: Double,
                maxResponseBytes: Int, allowPrivateAddresses: Bool, allowHTTP: Bool, connectionKey: String) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeoutSeconds = timeoutSeconds
        self.maxResponseBytes = maxResponseBytes
        self.allowPrivateAddresses = allowPrivateAddresses
        self.allowHTTP = allowHTTP
        self.connectionKey = connectionKey
    }
}

/// The upstream's answer.
public struct APIResponse: Sendable {
    public let status: Int
    /// Header lines in order, as received (names as the upstream spelled them).
    public let headers: [(name: String, value: String)]
    public let body: [UInt8]
}

/// Why there is no answer. Descriptions never hold a header, body or query string.
public enum APIExchangeError: Error, Sendable, Equatable {
    /// Every address of the host is in a refused range.
    case addressRefused
    /// The answer's body is over the cap.
    case tooLarge
    case timedOut
    /// Resolution, connection or TLS failed.
    case unreachable(String)
    case failed(String)
    /// Every transfer thread is busy and the line in front of them is full, or the request
    /// waited in it past its timeout: not sent.
    case busy
}

/// Where a streamed answer's body goes, as it arrives (on the transfer's thread).
public protocol APIBodySink: Sendable {
    /// Waits at most `milliseconds` for room (the transfer's deadline); false when nobody reads
    /// any more, or not in time: the transfer stops.
    func write(_ bytes: UnsafeRawBufferPointer, waitingAtMost milliseconds: Int) -> Bool
    /// The body ended: whole (`ok`), or broken off (a failed transfer, or over the cap).
    func finish(ok: Bool)
}

/// An answer: whole, or its head with the body streaming into the sink chosen for it.
public enum APIAnswer: Sendable {
    case whole(APIResponse)
    case streaming(status: Int, headers: [(name: String, value: String)])
}

/// The threads transfers run on, and the line in front of them: a transfer takes a thread while
/// fewer than `maxInFlight` run, else waits in a line of at most `maxInFlight` more — beyond it,
/// or once it has waited its whole timeout, it fails at once (`busy`). Every transfer ends by
/// its timeout, whatever its client does, so the line moves.
public final class APITransfers: Sendable {
    private let threads: BlockingThreads

    public init(maxInFlight: Int) {
        threads = BlockingThreads(limit: maxInFlight, queueLimit: maxInFlight)
    }

    /// Performs `request` on one of the threads. With `stream`, once the head has come (status,
    /// and the body's length when known) `stream` may give a sink: the answer is then
    /// `.streaming` at once, while the body goes on into the sink; else the body is held and the
    /// answer is `.whole` at the end.
    public func perform(
        _ request: APIRequest, stream: (@Sendable (_ status: Int, _ contentLength: Int64?) -> (any APIBodySink)?)? = nil
    ) async -> Result<APIAnswer, APIExchangeError> {
        await withCheckedContinuation { continuation in
            start(request, stream: stream) { continuation.resume(returning: $0) }
        }
    }

    /// `perform` for a caller that is not a task: `completion` gets the answer once, on the
    /// transfer's thread (or on the caller's, at once, when the transfer is refused as `busy`).
    public func start(
        _ request: APIRequest, stream: (@Sendable (_ status: Int, _ contentLength: Int64?) -> (any APIBodySink)?)? = nil,
        completion: @escaping @Sendable (Result<APIAnswer, APIExchangeError>) -> Void
    ) {
        let transfer = Transfer(choose: stream, completion: completion)
        let queued = ContinuousClock.now
        let accepted = threads.run {
            let waited = (ContinuousClock.now - queued).components
            let left = request.timeoutSeconds - Double(waited.seconds) - Double(waited.attoseconds) / 1e18
            guard left > 0 else { return transfer.fail(.busy) }
            transfer.run(request, timeoutSeconds: left)
        }
        if !accepted { transfer.fail(.busy) }
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

    static func headers(_ text: String) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        for line in text.split(separator: "\r\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        return headers
    }
}

/// One transfer on its thread: the caller's completion, called once — at the head when the body
/// streams, else at the end — and the sink the body streams into.
private final class Transfer: @unchecked Sendable {
    // Set and read on the transfer's thread only (the callbacks run inside tb_proxy_perform).
    private let choose: (@Sendable (Int, Int64?) -> (any APIBodySink)?)?
    private let completion: @Sendable (Result<APIAnswer, APIExchangeError>) -> Void
    private var sink: (any APIBodySink)?

    init(choose: (@Sendable (Int, Int64?) -> (any APIBodySink)?)?, completion: @escaping @Sendable (Result<APIAnswer, APIExchangeError>) -> Void) {
        self.choose = choose
        self.completion = completion
    }

    /// No transfer: the caller learns why.
    func fail(_ error: APIExchangeError) {
        completion(.failure(error))
    }

    /// Runs the transfer, within `timeoutSeconds` in all (what is left of the request's own).
    func run(_ request: APIRequest, timeoutSeconds: Double) {
        let lines = request.headers.map { "\($0.0): \($0.1)" }
        var cLines = lines.map { strdup($0) }
        defer { cLines.forEach { free($0) } }
        let connectionKey = strdup(request.connectionKey)
        defer { free(connectionKey) }
        var response = tb_proxy_response()
        defer { tb_proxy_response_free(&response) }
        let body = request.body ?? []
        let context = Unmanaged.passUnretained(self).toOpaque()
        request.method.withCString { method in
            request.url.withCString { url in
                cLines.withUnsafeMutableBufferPointer { linePointers in
                    linePointers.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: max(linePointers.count, 1)) { headerArray in
                        body.withUnsafeBufferPointer { bodyBytes in
                            var cRequest = tb_proxy_request(
                                method: method, url: url, headers: lines.isEmpty ? nil : headerArray, header_count: lines.count,
                                body: bodyBytes.baseAddress, body_length: bodyBytes.count, has_body: request.body == nil ? 0 : 1,
                                timeout_ms: Int(timeoutSeconds * 1000), connect_timeout_ms: Int(min(timeoutSeconds, request.timeoutSeconds / 2) * 1000),
                                max_response_bytes: request.maxResponseBytes,
                                allow_private_addresses: request.allowPrivateAddresses ? 1 : 0, allow_http: request.allowHTTP ? 1 : 0,
                                connection_key: connectionKey,
                                on_head: choose == nil ? nil : { context, status, headers, length, contentLength in
                                    let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
                                    return transfer.head(Int(status), headers, length, contentLength) ? 1 : 0
                                },
                                on_body: { context, data, length, waitMilliseconds in
                                    let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
                                    let bytes = UnsafeRawBufferPointer(start: data, count: length)
                                    return transfer.sink?.write(bytes, waitingAtMost: waitMilliseconds) == true ? 1 : 0
                                },
                                context: context
                            )
                            tb_proxy_perform(&cRequest, &response)
                        }
                    }
                }
            }
        }
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
        let headerText = response.headers.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: response.headers_length), as: UTF8.self) } ?? ""
        let bytes = response.body.map { Array(UnsafeBufferPointer(start: $0, count: response.body_length)) } ?? []
        completion(.success(.whole(APIResponse(status: response.status, headers: APIExchange.headers(headerText), body: bytes))))
    }

    /// The head has come: stream the body when `choose` gives a sink for it.
    private func head(_ status: Int, _ headers: UnsafePointer<CChar>?, _ length: Int, _ contentLength: Int64) -> Bool {
        guard let choose, let chosen = choose(status, contentLength >= 0 ? contentLength : nil) else { return false }
        sink = chosen
        let text = headers.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: length), as: UTF8.self) } ?? ""
        completion(.success(.streaming(status: status, headers: APIExchange.headers(text))))
        return true
    }

    private static func outcome(_ response: tb_proxy_response) -> APIExchangeError? {
        let error = withUnsafeBytes(of: response.error) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        switch Int(response.outcome) {
        case Int(TB_PROXY_OK.rawValue): return nil
        case Int(TB_PROXY_ADDRESS_REFUSED.rawValue): return .addressRefused
        case Int(TB_PROXY_TOO_LARGE.rawValue): return .tooLarge
        case Int(TB_PROXY_TIMEOUT.rawValue): return .timedOut
        case Int(TB_PROXY_UNREACHABLE.rawValue): return .unreachable(error)
        default: return .failed(error)
        }
    }
}
