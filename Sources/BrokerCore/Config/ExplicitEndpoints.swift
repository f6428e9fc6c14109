public import Foundation

/// A provider's endpoints as written in the configuration.
public struct ExplicitEndpoints: Sendable, Equatable {
    /// Where the browser is sent to authorize (`authorization_endpoint`).
    public var authorization: URL
    /// Where codes and refresh tokens are exchanged (`token_endpoint`).
    public var token: URL
    /// RFC 7009 token revocation (`revocation_endpoint`), if the provider has one.
    public var revocation: URL?
    /// The profile endpoint (`userinfo_endpoint`), if the provider has one.
    public var userinfo: URL?
    /// The JSON Web Key Set for ID-token signatures (`jwks_uri`), if the provider issues ID tokens.
    public var jwks: URL?

    /// Creates explicit endpoints.
    public init(authorization: URL, token: URL, revocation: URL? = nil, userinfo: URL? = nil, jwks: URL? = nil) {
        self.authorization = authorization
        self.token = token
        self.revocation = revocation
        self.userinfo = userinfo
        self.jwks = jwks
    }
}
