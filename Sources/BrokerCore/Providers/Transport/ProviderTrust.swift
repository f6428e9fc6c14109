import APIClient
import Foundation

/// The certificate authorities the broker's outbound TLS calls trust: the system's, parsed once
/// for the process (``CertificateAuthorities/system``), and for each provider with `ca_file` the
/// system's and its own, parsed once at start — for the origins of its issuer, its configured
/// endpoints and its API (the endpoints its discovery document names join them:
/// ``UpstreamClient/trust(_:as:)``). Two providers on one origin with different CA files: the
/// first listed wins there.
struct ProviderTrust: Sendable {
    /// The authorities of each provider with a CA file of its own.
    let byProvider: [String: CertificateAuthorities]
    /// The same, by the origins the configuration names for each.
    let origins: [String: CertificateAuthorities]

    init(_ providers: [ProviderConfig]) throws(CertificateAuthoritiesError) {
        var byProvider: [String: CertificateAuthorities] = [:]
        var origins: [String: CertificateAuthorities] = [:]
        for provider in providers {
            guard let file = provider.caFile else { continue }
            let authorities = try CertificateAuthorities(adding: file)
            byProvider[provider.id] = authorities
            var configured = [provider.userinfoEndpointOverride, provider.apiBaseURL]
            switch provider.endpoints {
            case .discovery(let issuer):
                configured.append(issuer)
            case .explicit(let endpoints):
                configured += [endpoints.authorization, endpoints.token, endpoints.revocation, endpoints.userinfo, endpoints.jwks]
            }
            for origin in configured.compactMap({ $0.flatMap(UpstreamClient.origin) }) where origins[origin] == nil {
                origins[origin] = authorities
            }
        }
        self.byProvider = byProvider
        self.origins = origins
    }

    /// What `provider`'s API calls trust: its own authorities, else the system's.
    func authorities(of provider: String) -> CertificateAuthorities? {
        byProvider[provider] ?? .system
    }
}
