public import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
public import Logging
import Synchronization

/// A provider's OpenID Connect discovery document (OpenID Connect Discovery 1.0 §3), reduced to
/// what the broker uses.
public struct DiscoveryDocument: Sendable, Equatable {
    public let issuer: URL
    public let authorizationEndpoint: URL
    public let tokenEndpoint: URL
    public let userinfoEndpoint: URL?
    public let jwksURI: URL?
    public let revocationEndpoint: URL?
    /// RFC 9126 §5: where pushed authorization requests go.
    public let pushedAuthorizationRequestEndpoint: URL?
    /// RFC 9126 §5: the provider accepts authorization requests only by PAR.
    public let requiresPushedAuthorizationRequests: Bool
    /// RFC 9207 §3: the provider puts `iss` in every authorization response.
    public let issuerInAuthorizationResponse: Bool
    /// RFC 8414 §2 / OpenID Connect Discovery §3: the client authentication methods the token
    /// endpoint takes; absent means `client_secret_basic` alone.
    public let tokenEndpointAuthMethods: [String]
    /// RFC 9449 §5.1: the algorithms the provider takes DPoP proofs in; nil when it lists none.
    public var dpopSigningAlgorithms: [String]? = nil

    /// Every endpoint it names, for the broker to call or to send browsers to.
    var endpoints: [URL] {
        [authorizationEndpoint, tokenEndpoint] + [userinfoEndpoint, jwksURI, revocationEndpoint, pushedAuthorizationRequestEndpoint].compactMap { $0 }
    }
}

/// Why discovery failed; safe to show to operators.
public struct DiscoveryError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

/// Fetches discovery documents and keeps each one after the first success. With a logger, an
/// issuer whose document cannot be fetched is logged once as that begins and once as it ends.
///
/// An issuer is fetched by one call at a time: callers that ask while it is under way wait for
/// its outcome. A failure is kept for `retryDelay`, and callers meanwhile get it without a call:
/// while a provider's discovery is down, every sign-in and `/readyz` probe that needs its document
/// would otherwise be one more request to a provider that is already failing.
public final class DiscoveryCache: Sendable {
    /// How long a failed fetch is the answer before the next caller fetches again.
    public static let retryDelay: Duration = .seconds(5)

    private enum Entry {
        case known(DiscoveryDocument)
        case fetching(Task<Result<DiscoveryDocument, DiscoveryError>, Never>)
        case failed(DiscoveryError, until: ContinuousClock.Instant)
    }

    private enum Lookup {
        case answered(Result<DiscoveryDocument, DiscoveryError>)
        case waiting(Task<Result<DiscoveryDocument, DiscoveryError>, Never>)
    }

    private let client: any UpstreamTransport
    private let entries = Mutex<[URL: Entry]>([:])
    private let outages: OutageWatches?

    public init(client: any UpstreamTransport, logger: Logger? = nil) {
        self.client = client
        outages = logger.map { OutageWatches(logger: $0) { "the discovery document of \($0)" } }
    }

    /// The cached document for `issuer`, without a network call.
    public func cached(_ issuer: URL) -> DiscoveryDocument? {
        entries.withLock { entries in
            guard case .known(let document) = entries[issuer] else { return nil }
            return document
        }
    }

    /// What is known of `issuer`'s document now, without waiting: the document, or why there is
    /// none (the last fetch's failure, or a fetch under way). A fetch begins in the background
    /// when none is under way and no failure is more recent than `retryDelay`: `/readyz`, which
    /// a probe with a short timeout asks, must never wait on a provider.
    public func withoutWaiting(_ issuer: URL) -> Result<DiscoveryDocument, DiscoveryError> {
        let now = ContinuousClock.now
        return entries.withLock { entries in
            switch entries[issuer] {
            case .known(let document):
                return .success(document)
            case .fetching:
                return .failure(DiscoveryError(description: "the discovery document is being fetched"))
            case .failed(let error, let until) where now < until:
                return .failure(error)
            case .failed(let error, _):
                entries[issuer] = .fetching(Task { await self.fetchOnce(issuer) })
                return .failure(error)
            case nil:
                entries[issuer] = .fetching(Task { await self.fetchOnce(issuer) })
                return .failure(DiscoveryError(description: "the discovery document is being fetched"))
            }
        }
    }

    /// The document for `issuer`: the cached one, else the outcome of the fetch under way, else
    /// the failure of the last fetch when it is more recent than `retryDelay`, else a new fetch's.
    public func document(for issuer: URL) async throws(DiscoveryError) -> DiscoveryDocument {
        let now = ContinuousClock.now
        let lookup: Lookup = entries.withLock { entries in
            switch entries[issuer] {
            case .known(let document):
                return .answered(.success(document))
            case .fetching(let task):
                return .waiting(task)
            case .failed(let error, let until) where now < until:
                return .answered(.failure(error))
            case .failed, nil:
                let task = Task { await self.fetchOnce(issuer) }
                entries[issuer] = .fetching(task)
                return .waiting(task)
            }
        }
        switch lookup {
        case .answered(let result): return try result.get()
        case .waiting(let task): return try await task.value.get()
        }
    }

    /// The one fetch under way for `issuer`: its outcome is recorded for every caller.
    private func fetchOnce(_ issuer: URL) async -> Result<DiscoveryDocument, DiscoveryError> {
        let result: Result<DiscoveryDocument, DiscoveryError>
        do throws(DiscoveryError) {
            result = .success(try await fetch(issuer))
        } catch {
            result = .failure(error)
        }
        entries.withLock { entries in
            switch result {
            case .success(let document): entries[issuer] = .known(document)
            case .failure(let error): entries[issuer] = .failed(error, until: ContinuousClock.now + Self.retryDelay)
            }
        }
        switch result {
        case .success: outages?(issuer.absoluteString).succeeded()
        case .failure(let error): outages?(issuer.absoluteString).failed(error.description)
        }
        return result
    }

    private func fetch(_ issuer: URL) async throws(DiscoveryError) -> DiscoveryDocument {
        let location = Self.discoveryURL(for: issuer)
        var request = URLRequest(url: location)
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        let response: UpstreamResponse
        do {
            response = try await client.send(request)
        } catch {
            throw DiscoveryError(description: "discovery failed: \(error)")
        }
        guard response.status == 200 else {
            throw DiscoveryError(description: "discovery at \(issuer.host ?? "?") answered HTTP \(response.status)")
        }
        let document = try Self.parse(response.body, expectedIssuer: issuer)
        client.trust(document.endpoints, as: issuer)
        return document
    }

    /// `issuer` + `/.well-known/openid-configuration`, keeping any path the issuer has.
    static func discoveryURL(for issuer: URL) -> URL {
        var text = issuer.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        return URL(string: text + "/.well-known/openid-configuration") ?? issuer
    }

    /// Parses a discovery document; its `issuer` must equal the configured one exactly (§4.3),
    /// which stops a document from one issuer being passed off as another's.
    static func parse(_ body: [UInt8], expectedIssuer: URL) throws(DiscoveryError) -> DiscoveryDocument {
        struct Wire: Decodable {
            let issuer: String
            let authorization_endpoint: String
            let token_endpoint: String
            let userinfo_endpoint: String?
            let jwks_uri: String?
            let revocation_endpoint: String?
            let pushed_authorization_request_endpoint: String?
            let require_pushed_authorization_requests: Bool?
            let authorization_response_iss_parameter_supported: Bool?
            let token_endpoint_auth_methods_supported: [String]?
            let dpop_signing_alg_values_supported: [String]?
        }
        guard let wire = try? JSONDecoder().decode(Wire.self, from: Data(body)) else {
            throw DiscoveryError(description: "the discovery document of \(expectedIssuer.absoluteString) is not valid JSON with the required fields")
        }
        guard wire.issuer == expectedIssuer.absoluteString else {
            throw DiscoveryError(description: "the discovery document names issuer \(wire.issuer), not the configured \(expectedIssuer.absoluteString)")
        }
        func url(_ text: String?, _ field: String) throws(DiscoveryError) -> URL? {
            guard let text else { return nil }
            guard let url = URL(string: text), url.scheme != nil, url.host != nil else {
                throw DiscoveryError(description: "the discovery document's \(field) is not an absolute URL")
            }
            return url
        }
        guard let authorization = try url(wire.authorization_endpoint, "authorization_endpoint"),
              let token = try url(wire.token_endpoint, "token_endpoint")
        else {
            throw DiscoveryError(description: "the discovery document lacks its endpoints")
        }
        return DiscoveryDocument(
            issuer: expectedIssuer,
            authorizationEndpoint: authorization,
            tokenEndpoint: token,
            userinfoEndpoint: try url(wire.userinfo_endpoint, "userinfo_endpoint"),
            jwksURI: try url(wire.jwks_uri, "jwks_uri"),
            revocationEndpoint: try url(wire.revocation_endpoint, "revocation_endpoint"),
            pushedAuthorizationRequestEndpoint: try url(wire.pushed_authorization_request_endpoint, "pushed_authorization_request_endpoint"),
            requiresPushedAuthorizationRequests: wire.require_pushed_authorization_requests ?? false,
            issuerInAuthorizationResponse: wire.authorization_response_iss_parameter_supported ?? false,
            tokenEndpointAuthMethods: wire.token_endpoint_auth_methods_supported ?? ["client_secret_basic"],
            dpopSigningAlgorithms: wire.dpop_signing_alg_values_supported
        )
    }
}
