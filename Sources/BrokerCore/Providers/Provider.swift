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

    /// A provider whose endpoints the configuration lists.
    init(config: ProviderConfig, explicit endpoints: ExplicitEndpoints) {
        self.config = config
        authorizationEndpoint = endpoints.authorization
        tokenEndpoint = endpoints.token
        revocationEndpoint = endpoints.revocation
        userinfoEndpoint = endpoints.userinfo
        jwksURI = endpoints.jwks
        issuer = nil
    }

    /// A provider by issuer, with its discovery document (whose `issuer` DiscoveryCache has
    /// checked against the configured one).
    init(config: ProviderConfig, discovered document: DiscoveryDocument) {
        self.config = config
        authorizationEndpoint = document.authorizationEndpoint
        tokenEndpoint = document.tokenEndpoint
        revocationEndpoint = document.revocationEndpoint
        userinfoEndpoint = config.userinfoEndpoint(discovered: document.userinfoEndpoint)
        jwksURI = document.jwksURI
        issuer = document.issuer.absoluteString
    }
}
