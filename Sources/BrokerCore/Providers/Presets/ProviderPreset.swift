/// What the broker knows about a well-known provider, so that a configuration entry needs only
/// `preset:`, `client_id` and a secret reference. Every value here can be overridden by the
/// provider's own configuration keys.
public struct ProviderPreset: Sendable {
    /// The name used as `preset:` in the configuration.
    public let name: String
    /// The endpoints, or the issuer whose discovery document lists them.
    public let endpoints: PresetEndpoints
    /// Values the endpoint templates need from the configuration (`tenant`).
    public let placeholders: [PresetPlaceholder]
    /// Scopes asked for when the configuration sets no `scopes`.
    public let defaultScopes: [String]
    /// How the broker authenticates at the token endpoint.
    public let tokenEndpointAuthMethod: TokenEndpointAuthMethod
    /// Extra authorization-request parameters; `authorization_params` is merged over them.
    public let authorizationParameters: [String: String]
    /// How the userinfo/profile response maps onto the normalised profile.
    public let profileMapping: ProfileMapping
    /// The HTTP method of the userinfo/profile call: `GET`, or `POST` with an empty body.
    public let userinfoMethod: String
    /// What joins scopes in the `scope` parameter and in the token response's `scope`.
    public let scopeSeparator: String
    /// Where the provider's API is, for the API proxy (`/proxy/{provider}/…`); nil: no proxy
    /// unless the configuration sets `api_base_url`.
    public let apiBaseURL: String?
    /// Request headers of the provider's API that the proxy passes on besides the standard ones.
    public let apiHeaders: [String]
    /// The provider's documentation these values were taken from.
    public let documentation: String

    /// Creates a preset.
    public init(name: String, endpoints: PresetEndpoints, placeholders: [PresetPlaceholder] = [],
                defaultScopes: [String], tokenEndpointAuthMethod: TokenEndpointAuthMethod = .clientSecretBasic,
                authorizationParameters: [String: String] = [:], profileMapping: ProfileMapping = .openIDConnect,
                userinfoMethod: String = "GET", scopeSeparator: String = " ", apiBaseURL: String? = nil,
                apiHeaders: [String] = [], documentation: String) {
        self.name = name
        self.endpoints = endpoints
        self.placeholders = placeholders
        self.defaultScopes = defaultScopes
        self.tokenEndpointAuthMethod = tokenEndpointAuthMethod
        self.authorizationParameters = authorizationParameters
        self.profileMapping = profileMapping
        self.userinfoMethod = userinfoMethod
        self.scopeSeparator = scopeSeparator
        self.apiBaseURL = apiBaseURL
        self.apiHeaders = apiHeaders
        self.documentation = documentation
    }

    /// The placeholder called `name`, if this preset has one.
    public func placeholder(named name: String) -> PresetPlaceholder? {
        placeholders.first { $0.name == name }
    }
}
