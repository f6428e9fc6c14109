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
    /// Where authorization requests are pushed first (RFC 9126), or nil: they go by the browser.
    public let pushedAuthorizationEndpoint: URL?
    /// The provider says it puts `iss` in every authorization response (RFC 9207 §3): one
    /// without it is refused.
    public let issuerInAuthorizationResponse: Bool
    /// Whether its grants' tokens are bound to a key of the broker's (DPoP, RFC 9449): proofs on
    /// every call that carries them (``ProviderRequirements/sendsProofs(_:_:)``).
    public let sendsProofs: Bool
    /// What the configuration relies on that the provider's discovery document does not offer
    /// (``ProviderRequirements``): while there is any, no login starts.
    public let problems: [String]

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
        pushedAuthorizationEndpoint = nil
        issuerInAuthorizationResponse = false
        // Without a discovery document only `required` says the provider takes proofs.
        sendsProofs = config.dpop == .required
        problems = []
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
        pushedAuthorizationEndpoint = ProviderRequirements.pushedAuthorizationEndpoint(config, document)
        issuerInAuthorizationResponse = document.issuerInAuthorizationResponse
        sendsProofs = ProviderRequirements.sendsProofs(config, document)
        problems = ProviderRequirements.problems(config, document)
    }
}
