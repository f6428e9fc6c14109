/// Where a preset's endpoints come from. URLs are templates: `{name}` placeholders (such as
/// Microsoft's `{tenant}`) are filled from the provider's configuration, see ``PresetPlaceholder``.
public enum PresetEndpoints: Sendable, Equatable {
    /// OpenID Connect discovery at this issuer.
    case discovery(issuer: String)
    /// OpenID Connect discovery at an issuer the configuration must give (`issuer:`), such as
    /// one Okta org or one Keycloak realm; `example` shows its shape in error messages.
    case configuredIssuer(example: String)
    /// Endpoints listed by the preset.
    case explicit(authorization: String, token: String, revocation: String? = nil, userinfo: String? = nil,
                  jwks: String? = nil)

    /// The templates by configuration key (`issuer`, `authorization_endpoint`, ...).
    public var templates: [String: String] {
        switch self {
        case .discovery(let issuer):
            return ["issuer": issuer]
        case .configuredIssuer:
            return [:]
        case .explicit(let authorization, let token, let revocation, let userinfo, let jwks):
            var templates = ["authorization_endpoint": authorization, "token_endpoint": token]
            templates["revocation_endpoint"] = revocation
            templates["userinfo_endpoint"] = userinfo
            templates["jwks_uri"] = jwks
            return templates
        }
    }
}
