/// How the broker proves to a provider that it is the registered client, with what it needs for
/// that: a client secret, or the keys that sign its client assertions.
public enum ClientAuthentication: Sendable {
    /// HTTP Basic with the client id and this secret (RFC 6749 §2.3.1).
    case clientSecretBasic(Secret)
    /// The client id and this secret in the form body (RFC 6749 §2.3.1).
    case clientSecretPost(Secret)
    /// A client assertion signed with these keys (RFC 7523 §2.2, OpenID Connect Core §9).
    case privateKeyJWT(ClientAssertionSigner)

    /// The method's registered name.
    public var method: TokenEndpointAuthMethod {
        switch self {
        case .clientSecretBasic: .clientSecretBasic
        case .clientSecretPost: .clientSecretPost
        case .privateKeyJWT: .privateKeyJWT
        }
    }
}
