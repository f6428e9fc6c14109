import WireValues

/// Why a call to a provider's token, revocation, PAR or userinfo endpoint failed.
enum ProviderCallError: Error, Sendable, CustomStringConvertible {
    /// The provider answered an OAuth error (RFC 6749 §5.2), e.g. `invalid_grant`.
    case oauth(code: String, description: String?, status: Int)
    /// The provider could not be reached, timed out, or sent too much.
    case unavailable(UpstreamError)
    /// The provider answered something the broker cannot use.
    case badResponse(String)
    /// The provider issued tokens the broker cannot use (a token type it does not know, a token
    /// bound to a key the broker did not send): they are live at the provider, and the caller
    /// revokes them.
    case unusableTokens(String, TokenResponse)
    /// The userinfo endpoint rejected the access token (HTTP 401).
    case unauthorized
    /// The broker could not sign its client assertion (`private_key_jwt`); nothing was sent.
    case clientAssertion(String)
    /// The broker could not sign its DPoP proof; nothing was sent.
    case proof(String)

    /// Only the provider saying `invalid_grant` ends a grant; everything else may pass.
    var endsGrant: Bool {
        if case .oauth(code: "invalid_grant", _, _) = self { return true }
        return false
    }

    /// What failed, for the client and the logs; never a token or a body.
    var description: String {
        switch self {
        case .oauth(let code, _, let status):
            "The provider refused the request (\(FormFields.printableCode(code)), HTTP \(status))."
        case .unavailable(let error):
            "The provider is unavailable: \(error.description)."
        case .badResponse(let reason), .unusableTokens(let reason, _):
            "The provider's answer was unusable: \(reason)."
        case .unauthorized:
            "The provider rejected the access token."
        case .clientAssertion(let reason):
            "The broker could not sign its client assertion: \(reason)."
        case .proof(let reason):
            "The broker could not sign its DPoP proof: \(reason)."
        }
    }

    /// The failure in one word, a `refresh.failing` event's reason: the `error` code a client
    /// gets for it (its answer in `API/Errors/`), `upstream_unavailable` when a retry may
    /// succeed, `upstream_error` otherwise.
    var code: String {
        if case .unavailable = self { return "upstream_unavailable" }
        return "upstream_error"
    }
}
