public import Foundation

/// An identity provider the broker is a client of: one entry of the `providers` section.
///
/// Printing a provider never shows its secret (see ``Secret``).
public struct ProviderConfig: Sendable {
    /// The provider's id, the key under `providers`.
    public let id: String
    /// The preset the entry started from (`preset`), if any.
    public let preset: String?
    /// Its endpoints, discovered or explicit.
    public let endpoints: ProviderEndpoints
    /// With discovery: a `userinfo_endpoint` from the configuration, used instead of the
    /// discovered one. Always `nil` with explicit endpoints (the userinfo endpoint is in them).
    public let userinfoEndpointOverride: URL?
    /// The client id registered with the provider (`client_id`).
    public let clientID: String
    /// How the broker authenticates as the client: with the secret read from `client_secret_env`
    /// or `client_secret_file` at load time, or with the keys of `private_key_file` and
    /// `second_key_file` (`private_key_jwt`).
    public let clientAuthentication: ClientAuthentication
    /// Scopes asked for by default (`scopes`). Defaults to the preset's; without a preset, to
    /// `[openid]` with discovery, else none.
    public let scopes: [String]
    /// Extra authorization-request parameters: the preset's, with `authorization_params` merged over them.
    public let authorizationParameters: [String: String]
    /// Whether authorization requests go by Pushed Authorization Requests (`par`).
    public let pushedAuthorization: PushedAuthorizationMode
    /// Whether the provider's tokens are bound to a key of the broker's (`dpop`, RFC 9449).
    public let dpop: ProviderDPoPMode
    /// Whether plain-http endpoints on non-loopback hosts were allowed (`allow_insecure_http`).
    public let allowInsecureHTTP: Bool
    /// How the userinfo/profile response maps onto the normalised profile: the preset's, else
    /// the OpenID Connect standard claims.
    public let profileMapping: ProfileMapping
    /// The HTTP method of the userinfo/profile call (`GET`; `POST` with an empty body for Dropbox).
    public let userinfoMethod: String
    /// What joins scopes in the `scope` parameter and in token responses (`" "`; GitHub: `","`).
    public let scopeSeparator: String
    /// Where the provider's API is (`api_base_url`, or the preset's): the API proxy forwards
    /// `/proxy/{provider}/{path}` to this URL joined with `{path}`. nil: no proxy.
    public let apiBaseURL: URL?
    /// Request headers of the API the proxy passes on besides the standard ones (`api_headers`, or the preset's).
    public let apiHeaders: [String]
    /// Whether the proxy may connect to loopback, private and link-local addresses for this
    /// provider (`api_allow_private_addresses`): a test upstream, an API inside your network.
    public let apiAllowPrivateAddresses: Bool
    /// Whose calls share the proxy's connections to the API (`api_connections`).
    public let apiConnections: APIConnections
    /// A PEM file of certificate authorities trusted besides the system's for this provider's
    /// hosts (`ca_file`, an absolute path): its issuer, endpoints, discovery, keys, revocation and
    /// API, as an enterprise's private CA needs.
    public let caFile: String?
    /// What a person is shown for the provider (`display_name`, such as `Google Workspace`), or nil
    /// for its id.
    public let displayName: String?

    /// The provider's name for a person: its display name, else its id.
    public var shownName: String { displayName ?? id }

    /// How the broker authenticates at the token, revocation and PAR endpoints.
    public var tokenEndpointAuthMethod: TokenEndpointAuthMethod { clientAuthentication.method }

    /// The client secret; nil with `private_key_jwt`.
    public var clientSecret: Secret? {
        switch clientAuthentication {
        case .clientSecretBasic(let secret), .clientSecretPost(let secret): secret
        case .privateKeyJWT: nil
        }
    }

    /// The keys of `private_key_jwt`; nil with a client secret.
    public var clientAssertionSigner: ClientAssertionSigner? {
        if case .privateKeyJWT(let signer) = clientAuthentication { return signer }
        return nil
    }

    /// Creates a provider. The loader validates its input; this initializer does not.
    public init(id: String, endpoints: ProviderEndpoints, clientID: String, clientAuthentication: ClientAuthentication,
                scopes: [String] = [], authorizationParameters: [String: String] = [:],
                pushedAuthorization: PushedAuthorizationMode = .auto, dpop: ProviderDPoPMode = .auto,
                allowInsecureHTTP: Bool = false, preset: String? = nil, userinfoEndpointOverride: URL? = nil,
                profileMapping: ProfileMapping = .openIDConnect, userinfoMethod: String = "GET",
                scopeSeparator: String = " ", apiBaseURL: URL? = nil, apiHeaders: [String] = [],
                apiAllowPrivateAddresses: Bool = false, apiConnections: APIConnections = .shared, caFile: String? = nil,
                displayName: String? = nil) {
        self.id = id
        self.displayName = displayName
        self.preset = preset
        self.endpoints = endpoints
        self.userinfoEndpointOverride = userinfoEndpointOverride
        self.clientID = clientID
        self.clientAuthentication = clientAuthentication
        self.scopes = scopes
        self.authorizationParameters = authorizationParameters
        self.pushedAuthorization = pushedAuthorization
        self.dpop = dpop
        self.allowInsecureHTTP = allowInsecureHTTP
        self.profileMapping = profileMapping
        self.userinfoMethod = userinfoMethod
        self.scopeSeparator = scopeSeparator
        self.apiBaseURL = apiBaseURL
        self.apiHeaders = apiHeaders
        self.apiAllowPrivateAddresses = apiAllowPrivateAddresses
        self.apiConnections = apiConnections
        self.caFile = caFile
    }

    /// The userinfo endpoint to call: the configured override, else the explicit one, else
    /// `discovered` (from the discovery document).
    public func userinfoEndpoint(discovered: URL?) -> URL? {
        if let userinfoEndpointOverride { return userinfoEndpointOverride }
        if case .explicit(let endpoints) = endpoints { return endpoints.userinfo }
        return discovered
    }

    /// Authorization parameters the broker sets itself, which `authorization_params` may not override.
    static let reservedAuthorizationParameters: Set<String> = [
        "response_type", "client_id", "redirect_uri", "scope", "state",
        "code_challenge", "code_challenge_method", "nonce",
    ]
}
