public import Foundation

/// A provider ready for calls: its configuration and its endpoints, resolved from the
/// configuration or from its discovery document.
public struct Provider: Sendable {
    public let config: ProviderConfig
    public let authorizationEndpoint: URL
    public let tokenEndpoint: URL
    public let revocationEndpoint: URL?
    public let userinfoEndpoint: URL?
    public let jwksURI: URL?
    /// The issuer ID tokens and RFC 9207 `iss` parameters must name (discovery providers only).
    public let issuer: String?

    public var id: String { config.id }

    init(config: ProviderConfig, discovered: DiscoveryDocument?) {
        self.config = config
        switch config.endpoints {
        case .explicit(let endpoints):
            authorizationEndpoint = endpoints.authorization
            tokenEndpoint = endpoints.token
            revocationEndpoint = endpoints.revocation
            userinfoEndpoint = endpoints.userinfo
            jwksURI = endpoints.jwks
            issuer = nil
        case .discovery(let issuerURL):
            // Only called with the document of this issuer (DiscoveryCache checks it).
            authorizationEndpoint = discovered?.authorizationEndpoint ?? issuerURL
            tokenEndpoint = discovered?.tokenEndpoint ?? issuerURL
            revocationEndpoint = discovered?.revocationEndpoint
            userinfoEndpoint = config.userinfoEndpoint(discovered: discovered?.userinfoEndpoint)
            jwksURI = discovered?.jwksURI
            issuer = discovered?.issuer.absoluteString ?? issuerURL.absoluteString
        }
    }
}
