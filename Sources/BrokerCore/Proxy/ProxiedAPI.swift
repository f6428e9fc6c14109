import APIClient
import Foundation

/// A provider's API as the proxy calls it, made once at start from the provider's configuration.
/// Each call's closures hold this one reference: a copy of the whole configuration would retain,
/// and then release, each of its fields once more for every call.
final class ProxiedAPI: Sendable {
    let provider: String
    /// `api_base_url`; nil when the provider has no API to proxy.
    let baseURL: String?
    let allowPrivateAddresses: Bool
    /// The configuration allowed plain HTTP (loopback, `allow_insecure_http`).
    let allowHTTP: Bool
    /// The pool of connections the provider's sessions share; nil when each session has its own
    /// (`api_connections: per_session`).
    let sharedPool: String?
    /// What the API's TLS connections are verified against.
    let authorities: CertificateAuthorities?

    init(_ config: ProviderConfig, trust: ProviderTrust) {
        provider = config.id
        baseURL = config.apiBaseURL?.absoluteString
        allowPrivateAddresses = config.apiAllowPrivateAddresses
        allowHTTP = config.apiBaseURL?.scheme == "http"
        sharedPool = config.apiConnections == .shared ? "api:" + config.id : nil
        authorities = trust.authorities(of: config.id)
    }
}
