import APIClient
import BrokerCrypto
import Foundation
import Logging
import Synchronization
import HTTPServer
import WireValues

/// `/proxy/{provider}/{path}` (GET, HEAD, POST, PUT, PATCH, DELETE): the API proxy
/// (``APIProxy``). The path and query are checked before anything else; the bearer session must
/// be the provider's; each session has its own rate limit and bound on transfers in flight, and
/// each client address a bound on the answers streaming to it (``ProxyTransferSlots``); the API's
/// answer comes back with its status and the headers ``ProxyHeaders`` lets through.
/// A class: each request's closures capture it, one reference rather than a retain per field.
final class ProxyRoutes: Sendable {
    static let methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
    /// Every proxied method: a session's, limited once the session is known.
    static let policy = RoutePolicy(
        caller: .session, limit: .inHandler("proxy_requests_per_minute per session, and the transfers per session and per address"),
        body: .forwarded
    )

    let config: BrokerConfig
    let proxy: APIProxy
    let callers: Callers
    let admission: Admission
    let metrics: BrokerMetrics
    let logger: Logger
    /// The proxy's event loop (its transfers).
    let transfers: APITransfers

    init(config: BrokerConfig, proxy: APIProxy, callers: Callers, admission: Admission, metrics: BrokerMetrics, logger: Logger,
         transfers: APITransfers) {
        self.config = config
        self.proxy = proxy
        self.callers = callers
        self.admission = admission
        self.metrics = metrics
        self.logger = logger
        self.transfers = transfers
    }

    func register(in routes: inout RouteTable) {
        let limits = config.server.limits
        let slots = ProxyTransferSlots(perSession: limits.proxyMaxTransfersPerSession, perClient: limits.proxyMaxTransfersPerIP)
        for provider in config.providers {
            let prefix = "/proxy/\(provider.id)"
            let label = "\(prefix)/{path}"
            let passed = ProxyHeaders.passedToAPI(extras: provider.apiHeaders)
            let api = ProxiedAPI(provider, trust: proxy.settings.trust)
            for method in Self.methods {
                let handler: Handler = { [self] request throws(HTTPError) in
                    try forward(request, api: api, path: Self.path(of: request, after: prefix), route: label, slots: slots, passed: passed)
                }
                routes.addPrefix(method, prefix + "/", label: label, Self.policy, handler)
                routes.add(method, prefix, Self.policy, handler)
            }
        }
    }

    /// What follows `prefix` (which the router matched, by bytes) in the request's path.
    private static func path(of request: Request, after prefix: String) -> Substring {
        let path = request.path
        return path[path.utf8.index(path.utf8.startIndex, offsetBy: prefix.utf8.count)...]
    }

    private func forward(_ request: Request, api: ProxiedAPI, path: Substring, route: String, slots: ProxyTransferSlots,
                         passed: [String]) throws(HTTPError) -> Reply {
        guard let base = api.baseURL else {
            throw HTTPError(status: 404, code: "not_found", description: "This provider has no API proxy: its configuration sets no api_base_url.")
        }
        let url: String
        switch ProxyPath.target(base: base, path: path, query: request.rawQuery) {
        case .success(let target): url = target
        case .failure(let refusal):
            metrics.rejected(route: route, reason: "proxy_path")
            throw .badRequest(refusal.reason)
        }
        let headers = try Self.clientHeaders(request, passed: passed)
        let method = request.method
        let client = ClientKey.of(request.clientIP) // an IPv6 client by its /64, as every per-client limit
        let body: [UInt8]? = ["POST", "PUT", "PATCH"].contains(method) || !request.body.isEmpty ? request.body : nil
        return try callers.withBearerSession(request) { [self] session throws(HTTPError) in
            guard session.provider == api.provider else {
                metrics.rejected(route: route, reason: "proxy_wrong_provider")
                throw HTTPError(status: 403, code: "wrong_provider", description: "This session is for another provider.")
            }
            try admission.admit(client: session.id.hex, to: admission.proxyLimiter, route: route)
            guard let slot = slots.take(session: session.id, client: client) else {
                metrics.rejected(route: route, reason: "proxy_in_flight")
                throw Self.inFlight
            }
            let started = ContinuousClock.now
            let forward = APIProxy.Forward(method: method, url: url, headers: headers, body: body)
            let holder = StreamHolder(slot: slot)
            // Answered from the proxy's loop thread when the token is fresh in hand (APIProxy.start).
            return .later { answer in
                self.proxy.start(forward, session: session, api: api, on: self.transfers, trace: answer.trace, stream: { _, length in
                    holder.choose(method: method, length: length, cap: self.proxy.settings.maxResponseBytes)
                }, completion: { result in
                    let response: Response
                    switch result {
                    case .success(let upstream):
                        // A streaming body gives the slot back when it ends; any other answer is whole here.
                        if case .whole = upstream { slot.release() }
                        if holder.refused {
                            // Admitted with others, its answer (to a GET) would have streamed past the address's bound.
                            self.metrics.rejected(route: route, reason: "proxy_in_flight")
                            response = Self.inFlight.response
                        } else {
                            response = Self.answer(upstream, method: method, holder: holder)
                        }
                    case .failure(let error):
                        slot.release()
                        if case .exchange(let reason) = error {
                            // The reason is libcurl's fixed text for its error code: never the URL or a header.
                            self.logger.warning("API call failed", metadata: ["provider": "\(api.provider)", "reason": "\(reason)"])
                        }
                        response = Self.httpError(error).response
                    }
                    self.metrics.proxyRequest(provider: api.provider, status: response.status, seconds: (ContinuousClock.now - started).seconds)
                    answer(response)
                })
            }
        }
    }

    /// The client's headers that go on to the API: those of `passed` it sent — a list sent in
    /// several fields as one (RFC 9110 §5.3), as `If-None-Match` with two validators; a header
    /// that is no list, given twice, is a 400 — and the request's id and trace (the API's logs
    /// then name the call as the broker's do).
    private static func clientHeaders(_ request: Request, passed: [String]) throws(HTTPError) -> [(String, String)] {
        var headers: [(String, String)] = []
        headers.reserveCapacity(passed.count + 3)
        let connection = request.header("Connection") == nil ? nil : request.joinedHeader("Connection")
        for name in passed {
            guard let first = request.header(name) else { continue }
            let joined = request.joinedHeader(name) ?? ""
            if joined != first, ProxyHeaders.singletons.contains(name) { throw .badRequest("\(name) is given more than once.") }
            guard ProxyHeaders.isPlainValue(joined), !ProxyHeaders.isListed(name, in: connection) else { continue }
            headers.append((name, joined))
        }
        request.trace.appendHeaders(to: &headers)
        return headers
    }

    /// The most bytes of the API's headers passed back (names, values, and 4 bytes a line): the
    /// answer's head must fit in what libmicrohttpd keeps for a connection, with the request's
    /// head and the broker's own headers (`ServerConfiguration.connectionMemoryBytes` leaves
    /// 16 KiB beyond the request's limits). An API's answer whose headers pass more is a 502, not
    /// a connection closed without an answer.
    static let maxPassedHeaderBytes = 8192

    /// The API's answer as the client gets it: whole, or streaming its body through the holder's
    /// stream.
    private static func answer(_ answer: APIAnswer, method: String, holder: StreamHolder) -> Response {
        func passed(_ headers: [(name: String, value: String)]) -> [HTTPHeader]? {
            var passing: [HTTPHeader] = []
            passing.reserveCapacity(headers.count)
            var bytes = 0
            let connection = ProxyHeaders.joinedValue(of: "Connection", in: headers)
            for header in headers where ProxyHeaders.passesBack(header.name) && ProxyHeaders.isTokenName(header.name)
                && ProxyHeaders.isPlainValue(header.value) && !ProxyHeaders.isListed(header.name, in: connection) {
                bytes += header.name.utf8.count + header.value.utf8.count + 4
                passing.append(HTTPHeader(header.name, header.value))
            }
            return bytes <= maxPassedHeaderBytes ? passing : nil
        }
        let headers = switch answer {
        case .whole(let upstream): passed(upstream.headers)
        case .streaming(_, let headers): passed(headers)
        }
        guard let headers else {
            holder.giveUp()
            return headersTooLarge.response
        }
        switch answer {
        case .whole(let upstream):
            guard method == "HEAD" else { return Response(status: upstream.status, headers: headers, body: upstream.body) }
            // The length the API announced for the body a GET would get (RFC 9110 §8.6): plain
            // digits, within what libmicrohttpd takes for a length (its largest is "unknown").
            let length = ProxyHeaders.value(of: "Content-Length", in: upstream.headers)
                .flatMap { $0.utf8.allSatisfy { (0x30...0x39).contains($0) } ? Int64($0) : nil }
            return Response(status: upstream.status, headers: headers, headLength: length.map { UInt64($0) })
        case .streaming(let status, _):
            return Response(status: status, headers: headers, stream: holder.stream)
        }
    }

    private static let headersTooLarge = HTTPError(
        status: 502, code: "upstream_error",
        description: "The API's answer has more headers than the proxy passes on (\(maxPassedHeaderBytes / 1024) KiB).")

    /// The stream a proxied answer's body goes into, when it is one to stream: one of unknown
    /// length or longer than the stream's buffer; not for `HEAD` (no body), nor when its announced
    /// length is over the cap (then it is held, and refused).
    /// Made on the loop's thread, read once the answer is back: on that thread, or after it
    /// (through the continuation that hands a retried answer over).
    private final class StreamHolder: @unchecked Sendable {
        /// Up to this many bytes wait for a slow client before the API's transfer pauses.
        static let capacity = 262_144

        let slot: ProxyTransferSlots.Slot
        var stream: ResponseStream?
        /// The answer would have streamed past its client address's bound: the client gets a 429,
        /// and the API's transfer stops.
        var refused = false
        /// The stream was given up (the answer could not be passed on): its sink takes nothing.
        /// Atomic: set by the completion, on the loop's thread or in the task of a retry.
        private let givenUp = Atomic(false)

        init(slot: ProxyTransferSlots.Slot) {
            self.slot = slot
        }

        func choose(method: String, length: Int64?, cap: Int) -> (any APIBodySink)? {
            // A short answer of known length is held: one buffer, sent with its length, is cheaper.
            if let length, length <= Int64(Self.capacity) || length > Int64(cap) { return nil }
            guard method != "HEAD" else { return nil }
            // Past the address's bound, a GET is refused (sent again, it does no harm); another
            // method's call has done its work at the API, and its answer streams all the same.
            guard slot.stream(pastTheBound: method != "GET") else {
                refused = true
                return RefusedSink(slot: slot)
            }
            // Held whole when no stream can be made; it counted as streaming, and is given back so.
            guard let made = ResponseStream(capacity: Self.capacity) else { return nil }
            stream = made
            return StreamSink(stream: made, slot: slot, holder: self)
        }

        /// Gives the stream up: the client gets another answer, and the API's transfer stops —
        /// at the answer's head when the completion runs before the transfer asks its sink
        /// (``StreamSink/takesBody``), as on the loop's thread it does.
        func giveUp() {
            stream?.abandon()
            givenUp.store(true, ordering: .releasing)
        }

        var isGivenUp: Bool { givenUp.load(ordering: .acquiring) }
    }

    /// The sink of an answer refused before it streamed: it takes nothing, so the transfer stops
    /// at the answer's head, and it gives the transfer's slot back when the transfer has stopped.
    private struct RefusedSink: APIBodySink {
        let slot: ProxyTransferSlots.Slot
        let takesBody = false

        func offer(_ bytes: UnsafeRawBufferPointer, waker: APIBodyWaker) -> APIBodyOffer {
            .stop
        }

        func finish(ok: Bool) {
            slot.release()
        }
    }

    /// A response stream as the API client's sink; the transfer's slot goes back with its end.
    private struct StreamSink: APIBodySink {
        let stream: ResponseStream
        let slot: ProxyTransferSlots.Slot
        let holder: StreamHolder

        var takesBody: Bool { !holder.isGivenUp }

        func offer(_ bytes: UnsafeRawBufferPointer, waker: APIBodyWaker) -> APIBodyOffer {
            switch stream.offer(bytes, wake: waker.function, context: waker.context, tag: waker.tag) {
            case .taken: .taken
            case .full: .full
            case .closed: .stop
            }
        }

        func finish(ok: Bool) {
            stream.finish(ok: ok)
            slot.release()
        }
    }

    /// 429: the session has its bound of calls under way, or the client address its bound of
    /// answers streaming to it.
    private static let inFlight = HTTPError(
        status: 429, code: "rate_limited",
        description: "Too many API calls of this session, or answers streaming to this address, are under way; retry when one has ended.",
        headers: [HTTPHeader("Retry-After", "1")])

    /// 401 `token_refreshed`: the request was not sent again (its body is longer than the proxy
    /// keeps to replay), and would now succeed.
    private static func sendAgain(_ what: String) -> HTTPError {
        HTTPError(status: 401, code: "token_refreshed", description: what + " (its body is longer than it keeps to replay): send it again.",
                  headers: [HTTPHeader("WWW-Authenticate", #"Bearer error="invalid_token""#)])
    }

    private static func httpError(_ failure: ProxyFailure) -> HTTPError {
        switch failure {
        case .refresh(let error):
            return error.httpError
        case .nonceNotRetried:
            return sendAgain("The API asked for a new DPoP nonce, which the broker now has, and the broker did not send the request again")
        case .refreshedNotRetried:
            return sendAgain("The API refused the provider's token; the broker refreshed it but did not send the request again")
        case .exchange(.addressRefused):
            return HTTPError(status: 502, code: "upstream_address_refused",
                             description: "The API's host resolves to an address the proxy does not connect to (loopback, private, link-local or metadata).")
        case .exchange(.tooLarge):
            return HTTPError(status: 502, code: "upstream_response_too_large", description: "The API's answer is larger than the proxy passes on.")
        case .exchange(.timedOut):
            return .upstreamUnavailable("The API did not answer in time.")
        case .exchange(.unreachable):
            return .upstreamUnavailable("The API could not be reached.")
        case .exchange(.tls):
            return HTTPError(status: 502, code: "upstream_error", description: "The API's TLS certificate could not be verified.")
        case .exchange(.failed):
            return HTTPError(status: 502, code: "upstream_error", description: "The API's answer could not be read.")
        case .exchange(.busy):
            return HTTPError(status: 503, code: "proxy_busy", description: "The proxy has as many API calls under way as it takes; retry shortly.",
                             headers: [HTTPHeader("Retry-After", "1")])
        }
    }
}
