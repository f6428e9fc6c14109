/// An identity provider the broker is a client of: one entry of the `providers` section.
///
/// Printing a provider never shows its secret (see ``Secret``).
public struct ProviderConfig: Sendable {
    /// The provider's id, the key under `providers`.
    public let id: String
    /// Its endpoints, discovered or explicit.
    public let endpoints: ProviderEndpoints
    /// The client id registered with the provider (`client_id`).
    public let clientID: String
    /// The client secret, read from `client_secret_env` or `client_secret_file` at load time.
    public let clientSecret: Secret
    /// Scopes asked for by default (`scopes`). Defaults to `[openid]` with discovery, else none.
    public let scopes: [String]
    /// Extra authorization-request parameters (`authorization_params`), such as `access_type`.
    public let authorizationParameters: [String: String]
    /// How the broker authenticates at the token endpoint.
    public let tokenEndpointAuthMethod: TokenEndpointAuthMethod
    /// Whether plain-http endpoints on non-loopback hosts were allowed (`allow_insecure_http`).
    public let allowInsecureHTTP: Bool

    /// Creates a provider. The loader validates its input; this initializer does not.
    public init(id: String, endpoints: ProviderEndpoints, clientID: String, clientSecret: Secret,
                scopes: [String] = [], authorizationParameters: [String: String] = [:],
                tokenEndpointAuthMethod: TokenEndpointAuthMethod = .clientSecretBasic,
                allowInsecureHTTP: Bool = false) {
        self.id = id
        self.endpoints = endpoints
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.scopes = scopes
        self.authorizationParameters = authorizationParameters
        self.tokenEndpointAuthMethod = tokenEndpointAuthMethod
        self.allowInsecureHTTP = allowInsecureHTTP
    }

    /// Authorization parameters the broker sets itself, which `authorization_params` may not override.
    static let reservedAuthorizationParameters: Set<String> = [
        "response_type", "client_id", "redirect_uri", "scope", "state",
        "code_challenge", "code_challenge_method", "nonce",
    ]
}
