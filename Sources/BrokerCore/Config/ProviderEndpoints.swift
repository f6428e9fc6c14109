public import Foundation

/// How a provider's endpoints are known: from OIDC discovery, or listed in the configuration.
public enum ProviderEndpoints: Sendable, Equatable {
    /// Fetch `<issuer>/.well-known/openid-configuration` for the endpoints.
    case discovery(issuer: URL)
    /// Endpoints given in the configuration.
    case explicit(ExplicitEndpoints)

    /// The OIDC issuer, when discovery is used.
    public var issuer: URL? {
        if case .discovery(let issuer) = self { return issuer }
        return nil
    }
}
