/// How the broker authenticates to a provider's token endpoint (RFC 6749 §2.3.1, OpenID Connect
/// Core §9), and to its revocation and pushed authorization request endpoints.
public enum TokenEndpointAuthMethod: String, Sendable, Hashable, CaseIterable {
    /// HTTP Basic authentication with the client id and secret.
    case clientSecretBasic = "client_secret_basic"
    /// `client_id` and `client_secret` in the form body.
    case clientSecretPost = "client_secret_post"
    /// A JWT signed with the broker's private key (RFC 7523 §2.2): no shared secret.
    case privateKeyJWT = "private_key_jwt"
}
