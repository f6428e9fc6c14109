// Presets for providers that speak OpenID Connect. Most use discovery at their issuer, so the
// broker reads endpoints (and the JWKS for ID tokens) from the provider itself.

extension ProviderPreset {
    /// Google. The extra parameters ask for a refresh token on every consent and keep earlier
    /// grants when scopes are added later (incremental authorization).
    public static let google = ProviderPreset(
        name: "google", endpoints: .discovery(issuer: "https://accounts.google.com"),
        defaultScopes: ["openid", "email", "profile"], tokenEndpointAuthMethod: .clientSecretPost,
        authorizationParameters: ["access_type": "offline", "prompt": "consent", "include_granted_scopes": "true"],
        apiBaseURL: "https://www.googleapis.com",
        documentation: "https://developers.google.com/identity/openid-connect/openid-connect")

    /// Microsoft identity platform (Entra ID and personal accounts). Endpoints are explicit
    /// because the `common`, `organizations` and `consumers` discovery documents name the issuer
    /// `https://login.microsoftonline.com/{tenantid}/v2.0` literally, which never equals the
    /// configured one. There is no revocation endpoint. `emailVerified` stays unknown: Entra
    /// does not vouch for the `email` claim (an administrator can set it to anything).
    public static let microsoft = ProviderPreset(
        name: "microsoft",
        endpoints: .explicit(authorization: "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/authorize",
                             token: "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token",
                             userinfo: "https://graph.microsoft.com/oidc/userinfo",
                             jwks: "https://login.microsoftonline.com/{tenant}/discovery/v2.0/keys"),
        placeholders: [PresetPlaceholder(name: "tenant", defaultValue: "common", description:
            "common, organizations, consumers, a tenant id or a tenant domain such as contoso.onmicrosoft.com")],
        defaultScopes: ["openid", "profile", "email", "offline_access"], tokenEndpointAuthMethod: .clientSecretPost,
        profileMapping: ProfileMapping(subject: ["sub"], name: ["name", "preferred_username"], email: ["email"],
                                       picture: ["picture"]),
        apiBaseURL: "https://graph.microsoft.com", apiHeaders: ["ConsistencyLevel"],
        documentation: "https://learn.microsoft.com/entra/identity-platform/v2-protocols-oidc")

    /// GitLab.com; for a self-managed instance set `issuer` to its URL.
    public static let gitlab = ProviderPreset(
        name: "gitlab", endpoints: .discovery(issuer: "https://gitlab.com"),
        defaultScopes: ["openid", "profile", "email"], apiBaseURL: "https://gitlab.com/api/v4",
        documentation: "https://docs.gitlab.com/integration/openid_connect_provider/")

    /// Sign in with Slack (OpenID Connect).
    public static let slack = ProviderPreset(
        name: "slack", endpoints: .discovery(issuer: "https://slack.com"),
        defaultScopes: ["openid", "email", "profile"], tokenEndpointAuthMethod: .clientSecretPost,
        apiBaseURL: "https://slack.com/api",
        documentation: "https://docs.slack.dev/authentication/sign-in-with-slack/")

    /// Sign In with LinkedIn using OpenID Connect. LinkedIn takes the client secret in the body.
    public static let linkedin = ProviderPreset(
        name: "linkedin", endpoints: .discovery(issuer: "https://www.linkedin.com/oauth"),
        defaultScopes: ["openid", "profile", "email"], tokenEndpointAuthMethod: .clientSecretPost,
        apiBaseURL: "https://api.linkedin.com", apiHeaders: ["LinkedIn-Version", "X-Restli-Protocol-Version"],
        documentation: "https://learn.microsoft.com/linkedin/consumer/integrations/self-serve/sign-in-with-linkedin-v2")

    /// Twitch (OpenID Connect). Its userinfo endpoint answers only the claims asked for with the
    /// `claims` parameter, so the preset asks for the profile ones; it accepts only
    /// `client_secret_post`.
    public static let twitch = ProviderPreset(
        name: "twitch", endpoints: .discovery(issuer: "https://id.twitch.tv/oauth2"),
        defaultScopes: ["openid", "user:read:email"], tokenEndpointAuthMethod: .clientSecretPost,
        authorizationParameters: ["claims": #"{"userinfo":{"email":null,"email_verified":null,"#
            + #""picture":null,"preferred_username":null}}"#],
        documentation: "https://dev.twitch.tv/docs/authentication/getting-tokens-oidc/")

    /// Salesforce production orgs; for a sandbox or a My Domain set `issuer`
    /// (`https://test.salesforce.com`, `https://acme.my.salesforce.com`). The `refresh_token`
    /// scope is what makes Salesforce issue refresh tokens.
    public static let salesforce = ProviderPreset(
        name: "salesforce", endpoints: .discovery(issuer: "https://login.salesforce.com"),
        defaultScopes: ["openid", "profile", "email", "refresh_token"], tokenEndpointAuthMethod: .clientSecretPost,
        documentation: "https://help.salesforce.com/s/articleView?id=sf.remoteaccess_using_openid_discovery_endpoint.htm")
}
