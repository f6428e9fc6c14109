public import APIClient
public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import Synchronization
import WireValues

/// The one HTTP client for every call the broker makes to a provider (and to its webhook).
///
/// It runs on a libcurl event loop of its own (``APITransfers``, as the API proxy does): TLS
/// verified against the system's authorities and, at a provider with `ca_file`, its own besides
/// — each set parsed once (``CertificateAuthorities``), not for every new connection — with
/// connections and TLS sessions kept per set. Which set a call trusts goes by the origin it calls:
/// a provider's own set for the origins of its issuer, its configured endpoints and its API, and
/// of the endpoints its discovery document names (``trust(_:as:)``). Every call has a total deadline and
/// fails sooner when the provider is silent for half of it (connecting or answering); redirects
/// are never followed (a token endpoint that redirects is misconfigured or hostile), no proxy
/// from the environment is used, and a response larger than the cap is abandoned. Providers'
/// endpoints are the operator's own configuration: private and loopback addresses are allowed,
/// as are the http URLs the configuration admits.
public final class UpstreamClient: Sendable {
    /// What calls may take. The broker's come from the configuration (`Limits.upstream`), which
    /// writes their defaults; this type writes none but the response cap, which is not configured.
    public struct Limits: Sendable {
        public var silenceTimeout: Duration
        public var totalTimeout: Duration
        public var maxResponseBytes = 1 << 20
        /// Calls in flight at once; one more fails at once (the client gets a 503).
        public var maxInFlight: Int

        /// Calls that take at most `totalTimeoutSeconds` in all and are never silent for half of
        /// it (at least a second) — connecting or waiting for the answer's bytes.
        public init(maxInFlight: Int, totalTimeoutSeconds: Int) {
            self.maxInFlight = maxInFlight
            totalTimeout = .seconds(totalTimeoutSeconds)
            silenceTimeout = .seconds(max(1, totalTimeoutSeconds / 2))
        }
    }

    private let transfers: APITransfers
    private let limits: Limits
    private let inFlight = Atomic<Int>(0)
    /// The authorities of the origins (`scheme://host:port`) of providers with a CA of their own;
    /// every other origin: `system`.
    private let origins: Mutex<[String: CertificateAuthorities]>

    /// A client whose calls to an origin in `origins` trust its authorities, and to the others
    /// the system's (``CertificateAuthorities/system``, parsed once for the process). Nil when
    /// libcurl cannot make its event loop.
    public init?(limits: Limits, origins: [String: CertificateAuthorities] = [:]) {
        // Its line holds as many again: calls over maxInFlight are refused here first.
        guard let transfers = APITransfers(maxInFlight: limits.maxInFlight) else { return nil }
        self.transfers = transfers
        self.limits = limits
        self.origins = Mutex(origins)
    }

    /// The key of `url`'s origin in ``origins``.
    public static func origin(of url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
        return "\(scheme)://\(host):\(url.port ?? (scheme == "https" ? 443 : 80))"
    }

    public func trust(_ urls: [URL], as issuer: URL) {
        origins.withLock { origins in
            guard let authorities = Self.origin(of: issuer).flatMap({ origins[$0] }) else { return }
            for origin in urls.compactMap(Self.origin) where origins[origin] == nil { origins[origin] = authorities }
        }
    }

    /// What the client's calls did with connections (for the metrics).
    public var connections: (opened: Int, reused: Int, open: Int) { transfers.connections }

    /// Sends `request` and returns the answer, whatever its status.
    public func send(_ request: URLRequest) async throws(UpstreamError) -> UpstreamResponse {
        let host = request.url?.host ?? "?"
        guard inFlight.wrappingAdd(1, ordering: .relaxed).newValue <= limits.maxInFlight else {
            inFlight.wrappingSubtract(1, ordering: .relaxed)
            throw UpstreamError.busy(host: host)
        }
        defer { inFlight.wrappingSubtract(1, ordering: .relaxed) }
        guard let url = request.url?.absoluteString else { throw UpstreamError.unreachable(host: host) }
        let call = APIRequest(
            method: request.httpMethod ?? "GET", url: url,
            // A call made for a client's request carries its id and trace (TraceContext).
            headers: (request.allHTTPHeaderFields ?? [:]).sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
                + (TraceContext.current?.headers ?? []),
            body: request.httpBody.map { [UInt8]($0) }, timeoutSeconds: limits.totalTimeout.seconds,
            maxResponseBytes: limits.maxResponseBytes, allowPrivateAddresses: true, allowHTTP: true,
            connectionKey: "providers",
            authorities: request.url.flatMap(Self.origin).flatMap { origin in origins.withLock { $0[origin] } } ?? .system,
            silenceSeconds: limits.silenceTimeout.seconds
        )
        switch await transfers.perform(call) {
        case .success(.whole(let response)):
            let contentType = response.headers.last { $0.name.lowercased() == "content-type" }?.value
            return UpstreamResponse(status: response.status, contentType: contentType, body: response.body, headers: response.headers)
        case .success(.streaming):
            throw UpstreamError.unreachable(host: host) // never: no stream was offered
        case .failure(let error):
            throw UpstreamError(error, host: host)
        }
    }
}

extension Duration {
    /// The duration in seconds, as Foundation's time intervals count.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
