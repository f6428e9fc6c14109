/// What a client assertion's `aud` names (`client_assertion_audience`).
///
/// RFC 7523 §3 lets the authorization server say which values identify it, and providers differ:
/// the issuer identifier is what the update of RFC 7523 (draft-ietf-oauth-rfc7523bis) and
/// FAPI 2.0 require, since an assertion naming the endpoint it is sent to can be replayed at
/// another server that claims that endpoint (the audience-injection attacks published in 2025),
/// and what RFC 9126 §2 obliges every PAR endpoint to accept; Auth0 and Keycloak take it. Okta
/// and Entra ID document the URL of the endpoint called (the token endpoint for token calls).
public enum ClientAssertionAudience: String, Sendable, Hashable, CaseIterable {
    /// The provider's issuer identifier, alone (default for providers by `issuer`).
    case issuer
    /// The URL of the endpoint the assertion is sent to (default with explicit endpoints, which
    /// have no issuer).
    case endpoint
}
