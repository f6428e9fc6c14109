public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// Sends one request to a provider and returns its answer, whatever its status: what provider
/// calls, discovery and key-set downloads need of the network. The broker's is
/// ``UpstreamClient``; the flow services' unit tests answer in the process, without sockets.
public protocol UpstreamTransport: Sendable {
    func send(_ request: URLRequest) async throws(UpstreamError) -> UpstreamResponse
    /// The endpoints a provider's discovery document names (`urls`) are trusted as its issuer is:
    /// with the provider's own CA, when it has one (``UpstreamClient``).
    func trust(_ urls: [URL], as issuer: URL)
}

extension UpstreamTransport {
    /// A transport without CAs of its own trusts every URL the same.
    public func trust(_ urls: [URL], as issuer: URL) {}
}

/// A provider's answer.
public struct UpstreamResponse: Sendable {
    public let status: Int
    public let contentType: String?
    public let body: [UInt8]
    /// Its headers, as they came.
    public let headers: [(name: String, value: String)]

    public init(status: Int, contentType: String?, body: [UInt8], headers: [(name: String, value: String)] = []) {
        self.status = status
        self.contentType = contentType
        self.body = body
        self.headers = headers
    }

    /// The last value of the header `name` (any case).
    public func header(_ name: String) -> String? {
        headers.last { $0.name.lowercased() == name.lowercased() }?.value
    }
}

extension UpstreamClient: UpstreamTransport {}
