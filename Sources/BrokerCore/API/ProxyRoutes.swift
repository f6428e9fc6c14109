import APIClient
import BrokerCrypto
import Foundation
import Logging
import HTTPServer
import WireValues

/// `/proxy/{provider}/{path}` (GET, HEAD, POST, PUT, PATCH, DELETE): the API proxy
/// (``APIProxy``). The path and query are checked before anything else; the bearer session must
/// be the provider's; each session has its own rate limit; the API's answer comes back with its
/// status and the headers ``ProxyHeaders`` lets through.
struct ProxyRoutes: Sendable {
    static let methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]

    let services: BrokerServices

    func register(in router: inout Router) {
        for provider in services.config.providers {
            let prefix = "/proxy/\(provider.id)"
            let label = "\(prefix)/{path}"
            for method in Self.methods {
                let handler: Handler = { [self] request throws(HTTPError) in
                    try forward(request, provider: provider, path: request.path.dropFirst(prefix.utf8.count), route: label)
                }
                router.addPrefix(method, prefix + "/", label: label, handler)
                router.add(method, prefix, handler)
            }
        }
    }

    private func forward(_ request: Request, provider: ProviderConfig, path: Substring, route: String) throws(HTTPError) -> Reply {
        guard let base = provider.apiBaseURL else {
            throw HTTPError(status: 404, code: "not_found", description: "This provider has no API proxy: its configuration sets no api_base_url.")
        }
        let url: String
        switch ProxyPath.target(base: base.absoluteString, path: path, query: request.rawQuery) {
        case .success(let target): url = target
        case .failure(let refusal):
            services.metrics.rejected(route: route, reason: "proxy_path")
            throw .badRequest(refusal.reason)
        }
        let headers = Self.clientHeaders(request, extras: provider.apiHeaders)
        let method = request.method
        let body: [UInt8]? = ["POST", "PUT", "PATCH"].contains(method) || !request.body.isEmpty ? request.body : nil
        return try services.withBearerSession(request) { [services] session throws(HTTPError) in
            guard session.provider == provider.id else {
                services.metrics.rejected(route: route, reason: "proxy_wrong_provider")
                throw HTTPError(status: 403, code: "wrong_provider", description: "This session is for another provider.")
            }
            try services.admit(client: session.id.hex, to: services.proxyLimiter, route: route)
            let started = ContinuousClock.now
            return .deferredCatching { () async throws(HTTPError) -> Response in
                let forward = APIProxy.Forward(method: method, url: url, headers: headers, body: body)
                let response: Response
                do throws(ProxyFailure) {
                    response = Self.answer(try await services.proxy.forward(forward, session: session, provider: provider), method: method)
                } catch {
                    if case .exchange(let reason) = error {
                        // The reason is libcurl's (host and port at most): never the path's query or a header.
                        services.logger.warning("API call failed", metadata: ["provider": "\(provider.id)", "reason": "\(reason)"])
                    }
                    let failure = Self.httpError(error)
                    services.metrics.proxyRequest(provider: provider.id, status: failure.status, seconds: (ContinuousClock.now - started).seconds)
                    throw failure
                }
                services.metrics.proxyRequest(provider: provider.id, status: response.status, seconds: (ContinuousClock.now - started).seconds)
                return response
            }
        }
    }

    /// The client's headers that go on to the API: the standard ones and the provider's extras.
    private static func clientHeaders(_ request: Request, extras: [String]) -> [(String, String)] {
        var headers: [(String, String)] = []
        for name in ProxyHeaders.standard + extras {
            guard let value = request.header(name), ProxyHeaders.isPlainValue(value) else { continue }
            headers.append((name, value))
        }
        return headers
    }

    /// The API's answer as the client gets it.
    private static func answer(_ upstream: APIResponse, method: String) -> Response {
        let headers = upstream.headers
            .filter { ProxyHeaders.passesBack($0.name) && ProxyHeaders.isPlainValue($0.value) }
            .map { HTTPHeader($0.name, $0.value) }
        return Response(status: upstream.status, headers: headers, body: method == "HEAD" ? [] : upstream.body)
    }

    private static func httpError(_ failure: ProxyFailure) -> HTTPError {
        switch failure {
        case .refresh(let error):
            return error.httpError
        case .refreshedNotRetried:
            return HTTPError(
                status: 401, code: "token_refreshed",
                description: "The API refused the provider's token; the broker refreshed it but did not send the request again "
                    + "(its body is longer than it keeps to replay): send it again.",
                headers: [HTTPHeader("WWW-Authenticate", #"Bearer error="invalid_token""#)]
            )
        case .exchange(.addressRefused):
            return HTTPError(status: 502, code: "upstream_address_refused",
                             description: "The API's host resolves to an address the proxy does not connect to (loopback, private, link-local or metadata).")
        case .exchange(.tooLarge):
            return HTTPError(status: 502, code: "upstream_response_too_large", description: "The API's answer is larger than the proxy passes on.")
        case .exchange(.timedOut):
            return .upstreamUnavailable("The API did not answer in time.")
        case .exchange(.unreachable):
            return .upstreamUnavailable("The API could not be reached.")
        case .exchange(.failed):
            return HTTPError(status: 502, code: "upstream_error", description: "The API's answer could not be read.")
        }
    }
}
