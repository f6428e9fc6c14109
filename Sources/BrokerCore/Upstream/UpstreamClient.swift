import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import Synchronization

/// The one HTTP client for every call the broker makes to a provider.
///
/// It is Foundation's URLSession, which on Linux is libcurl with OpenSSL underneath: TLS
/// verification on with the system's CA store, and a build that takes seconds (AsyncHTTPClient
/// would add minutes to every clean build and a second TLS stack). Every call has an idle/connect
/// timeout and a total deadline, redirects are never followed (a token endpoint that redirects is
/// misconfigured or hostile), and a response larger than the cap is abandoned.
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

    private let session: URLSession
    private let guardian: SessionGuardian
    private let maxInFlight: Int
    private let inFlight = Atomic<Int>(0)

    public init(limits: Limits) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = limits.silenceTimeout.seconds
        configuration.timeoutIntervalForResource = limits.totalTimeout.seconds
        configuration.httpCookieAcceptPolicy = .never
        configuration.httpShouldSetCookies = false
        configuration.urlCache = nil
        guardian = SessionGuardian(maxResponseBytes: limits.maxResponseBytes)
        maxInFlight = limits.maxInFlight
        session = URLSession(configuration: configuration, delegate: guardian, delegateQueue: nil)
    }

    deinit {
        session.invalidateAndCancel()
    }

    /// Sends `request` and returns the answer, whatever its status.
    public func send(_ request: URLRequest) async throws(UpstreamError) -> UpstreamResponse {
        guard inFlight.wrappingAdd(1, ordering: .relaxed).newValue <= maxInFlight else {
            inFlight.wrappingSubtract(1, ordering: .relaxed)
            throw UpstreamError.busy(host: request.url?.host ?? "?")
        }
        defer { inFlight.wrappingSubtract(1, ordering: .relaxed) }
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: request)
        } catch let error as URLError {
            throw UpstreamError(error, host: request.url?.host ?? "?")
        } catch {
            throw UpstreamError.unreachable(host: request.url?.host ?? "?")
        }
        guard let http = response as? HTTPURLResponse else {
            throw UpstreamError.unreachable(host: request.url?.host ?? "?")
        }
        guard data.count <= guardian.maxResponseBytes else {
            throw UpstreamError.tooLarge(host: request.url?.host ?? "?")
        }
        return UpstreamResponse(
            status: http.statusCode,
            contentType: http.value(forHTTPHeaderField: "Content-Type"),
            body: [UInt8](data)
        )
    }
}

/// Refuses redirects and cancels downloads past the size cap.
private final class SessionGuardian: NSObject, URLSessionDataDelegate, Sendable {
    let maxResponseBytes: Int

    init(maxResponseBytes: Int) {
        self.maxResponseBytes = maxResponseBytes
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }

    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        let declared = response.expectedContentLength
        completionHandler(declared > Int64(maxResponseBytes) ? .cancel : .allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        if dataTask.countOfBytesReceived > Int64(maxResponseBytes) { dataTask.cancel() }
    }
}

extension Duration {
    /// The duration in seconds, as Foundation's time intervals count.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
