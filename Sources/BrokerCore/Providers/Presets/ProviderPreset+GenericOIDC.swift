// Presets for OpenID Connect servers that every customer runs at their own address: the
// configuration must give `issuer`; the preset contributes the scopes, the token-endpoint auth
// method and the standard-claims profile mapping.

extension ProviderPreset {
    /// Okta: the issuer of an authorization server of your org. Add `offline_access` to `scopes`
    /// (and allow the refresh-token grant on the app) for refresh tokens.
    public static let okta = ProviderPreset(
        name: "okta", endpoints: .configuredIssuer(example: "https://dev-123456.okta.com/oauth2/default"),
        defaultScopes: ["openid", "email", "profile"],
        documentation: "https://developer.okta.com/docs/reference/api/oidc/")

    /// Auth0: your tenant's domain, with the trailing slash Auth0 puts in its issuer. Auth0
    /// applications authenticate with `client_secret_post` unless configured otherwise; add
    /// `offline_access` to `scopes` for refresh tokens.
    public static let auth0 = ProviderPreset(
        name: "auth0", endpoints: .configuredIssuer(example: "https://dev-abc123.us.auth0.com/"),
        defaultScopes: ["openid", "email", "profile"], tokenEndpointAuthMethod: .clientSecretPost,
        documentation: "https://auth0.com/docs/authenticate/protocols/openid-connect-protocol")

    /// Keycloak: the realm's URL.
    public static let keycloak = ProviderPreset(
        name: "keycloak", endpoints: .configuredIssuer(example: "https://keycloak.example.com/realms/myrealm"),
        defaultScopes: ["openid", "email", "profile"],
        documentation: "https://www.keycloak.org/securing-apps/oidc-layers")

    /// Any other OpenID Connect provider, by its issuer.
    public static let oidc = ProviderPreset(
        name: "oidc", endpoints: .configuredIssuer(example: "https://login.example.com"),
        defaultScopes: ["openid", "email", "profile"],
        documentation: "https://openid.net/specs/openid-connect-discovery-1_0.html")
}
